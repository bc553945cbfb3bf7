#!/usr/bin/env python3
"""test-iobench-run: rf-iobench's workloads and measurements, end to end (--json).
A random write pass of a 1 MiB file in 4 KiB blocks with --fsync 16 --end-fsync makes
256 writes and 17 fsyncs (one per 16 writes, one at the end); the lat histogram in the
JSON holds every I/O once; the percentiles of slat, clat and lat rise with p, and lat
is at least clat; randrw --rwmixread 70 reads about 70 % of the bytes, and its "read" and
"write" figures (fio's) split the run's I/Os, bytes and latencies; a randread pass
(random map) transfers the region exactly once; with --norandommap too (draws with
replacement, same count of I/Os); --rate-iops holds within 5 % over 2 s, --rate over 1 s; zipf runs; two jobs each
make their pass and the report sums them; --verify crc32c writes and reads back, then finds a
byte flipped in the file and names its offset, the expected and the actual value.
--log-interval writes a CSV per job (about a row per interval) that tools/dev/plot-iobench
draws; a job file runs its jobs with the options the same command line gives, and an
unknown key fails naming its line; bssplit wins over bs wherever given, and a comment
after a value is cut off, as fio reads them. --bs ranges and splits keep one pass = the region
once (verify proves every grain written); --nrfiles / several --file spread a pass over
each file; randtrim punches every block; --hipri runs or says in one line why not; a job
file's jobs end when its process is killed; block sizes of 512, 1000 and 3 bytes and a
range of 1k-3k run (buffers sized to their alignment). The ramp's fsyncs are not
counted; --sqpoll randrw with fsyncs ends; a mixed run writes its pattern (stamped per
sector), never what a read left in the buffer; sequential rw reads and writes each from
their own place (as fio); --log-interval's rows start after the ramp, and a log that
cannot be written fails naming its file.
argv: the rf-iobench program."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

exe = sys.argv[1]
d = tempfile.mkdtemp()
f = os.path.join(d, "data")


def run(*args):
    p = subprocess.run([exe, "--file", f, "--json", *args], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        print("FAIL: rf-iobench %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr))
        sys.exit(1)
    return json.loads(p.stdout)


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


try:
    j = run("--rw", "randwrite", "--bs", "4k", "--qd", "8", "--size", "1m", "--fsync", "16",
            "--end-fsync")
    check(j["ios"] == 256 and j["write_bytes"] == 1 << 20, "256 writes of 4 KiB: %r" % j["ios"])
    check(j["syncs"] == 17, "17 fsyncs, got %d" % j["syncs"])
    check(sum(c for _, c in j["lat_histogram"]["buckets"]) == 256, "histogram holds every I/O")
    for k in ("slat", "clat", "lat"):
        p = [j[k]["percentiles_us"][x] for x in ("1", "5", "10", "50", "90", "95", "99", "99.5",
                                                 "99.9", "99.99")]
        check(p == sorted(p), "%s percentiles rise: %r" % (k, p))
        check(j[k]["n"] == 256, "%s counts every I/O" % k)
    check(j["lat"]["percentiles_us"]["50"] >= j["clat"]["percentiles_us"]["50"], "lat >= clat")
    check(j["random_map"] is True, "random map on by default")
    # block sizes that are not a multiple of the buffers' alignment (fio's bs=512, odd
    # sizes, a range): the buffers are sized up to it, as aligned_alloc requires (the
    # ASan build reports the call otherwise); a pass reads whole blocks of the region
    for bs, ios, nbytes in (("512", 128, 65536), ("1000", 65, 65000), ("3", 21845, 65535)):
        j = run("--rw", "randread", "--bs", bs, "--qd", "4", "--size", "64k")
        check(j["ios"] == ios and j["read_bytes"] == nbytes,
              "--bs %s over 64 KiB: %d reads, %d bytes" % (bs, j["ios"], j["read_bytes"]))
    j = run("--rw", "randread", "--bs", "1k-3k", "--qd", "4", "--size", "64k")
    check(j["read_bytes"] == 65536, "--bs 1k-3k reads the region once: %d" % j["read_bytes"])
    j = run("--rw", "randrw", "--rwmixread", "70", "--bs", "4k", "--qd", "8", "--runtime", "0.3",
            "--force")
    share = j["read_bytes"] / (j["read_bytes"] + j["write_bytes"])
    check(abs(share - 0.7) < 0.05, "randrw 70/30: read share %.3f" % share)
    # each direction apart, as fio's "read" and "write": the I/Os and bytes of each add
    # up to the run's, each histogram holds its own I/Os, and the trims are none
    r, w, t = j["read"], j["write"], j["trim"]
    check(r["ios"] + w["ios"] == j["ios"] and r["bytes"] == j["read_bytes"] and
          w["bytes"] == j["write_bytes"] and r["ios"] * 4096 == r["bytes"] and
          r["clat"]["n"] == r["lat"]["n"] == r["ios"] and w["lat"]["n"] == w["ios"] and
          t["ios"] == 0 and r["ios"] > w["ios"] > 0,
          "randrw: read %d + write %d I/Os of %d" % (r["ios"], w["ios"], j["ios"]))
    check(r["lat"]["max_us"] <= j["lat"]["max_us"] and w["lat"]["max_us"] <= j["lat"]["max_us"]
          and min(r["lat"]["min_us"], w["lat"]["min_us"]) == j["lat"]["min_us"],
          "randrw: the directions' latencies are the run's, split")
    j = run("--rw", "randread", "--bs", "4k", "--qd", "4")
    check(j["ios"] == 256 and j["bytes"] == 1 << 20, "one pass of the random map")
    check(j["read"]["ios"] == 256 and j["read"]["lat"]["n"] == 256 and j["write"]["ios"] == 0
          and j["write"]["lat"]["n"] == 0, "a read run's directions: all reads")
    j = run("--rw", "randread", "--bs", "4k", "--qd", "4", "--norandommap")
    check(j["ios"] == 256 and j["random_map"] is False, "norandommap: same count, no map")
    # --offset: the region's second half only; --ramp-time: measured after it
    j = run("--rw", "randread", "--bs", "4k", "--qd", "4", "--offset", "512k")
    check(j["ios"] == 128, "--offset 512k of 1 MiB: 128 blocks, got %d" % j["ios"])
    j = run("--rw", "randread", "--bs", "4k", "--qd", "4", "--runtime", "0.3", "--ramp-time", "0.2")
    check(abs(j["seconds"] - 0.3) < 0.08, "--ramp-time: the measured run is --runtime: %.3f s" % j["seconds"])
    # the ramp's fsyncs are not the measured run's (4,450 syncs for 38,498 writes / 16)
    j = run("--rw", "randwrite", "--bs", "4k", "--qd", "4", "--fsync", "16", "--runtime", "0.3",
            "--ramp-time", "0.3", "--force")
    writes = j["write_bytes"] // 4096
    check(writes // 16 - 4 <= j["syncs"] <= writes // 16 + 8,
          "--ramp-time: %d syncs for %d measured writes" % (j["syncs"], writes))
    # --sqpoll: a request may complete, and its slot be issued again, in one loop turn
    # (the list of slots to stamp became a cycle: the run hung, 3 of 3 with --fsync)
    j = run("--rw", "randrw", "--bs", "4k", "--qd", "8", "--runtime", "0.3", "--sqpoll",
            "--fsync", "4", "--force")
    check(j["ios"] > 0 and j["slat"]["n"] == j["ios"], "--sqpoll randrw: %d I/Os" % j["ios"])
    # mixed runs write their pattern, not what a read left in the buffer (zeros on a new
    # file: 10 of 16384 blocks written non-zero); each sector stamped (fio's scramble)
    os.unlink(f)
    with open(f, "wb") as fh:
        fh.truncate(1 << 20)
    run("--rw", "randrw", "--bs", "4k", "--qd", "8", "--force")
    data = open(f, "rb").read()
    blocks = [data[i:i + 4096] for i in range(0, len(data), 4096)]
    nz = sum(1 for b in blocks if b.count(0) != 4096)
    check(nz > 64, "randrw over a zeroed file: %d of 256 blocks written non-zero" % nz)
    written = [b for b in blocks if b.count(0) != 4096]
    check(len(set(written)) == len(written), "no two written blocks the same bytes")
    # sequential rw: reads and writes each at their own place from the start, as fio (one
    # shared position spread the writes over the whole file)
    with open(f, "wb") as fh:
        fh.truncate(1 << 20)
    run("--rw", "rw", "--bs", "4k", "--qd", "8", "--force")
    data = open(f, "rb").read()
    nz = [i for i in range(256) if data[i * 4096:(i + 1) * 4096].count(0) != 4096]
    check(nz and max(nz) < 160 and len(nz) > 96, "rw: writes in the first part only: %d "
          "blocks, the last %d" % (len(nz), max(nz) if nz else -1))
    # two jobs, each its own pass over the file: the sum and each job in the JSON
    j = run("--rw", "randread", "--bs", "4k", "--qd", "4", "--numjobs", "2")
    check(j["numjobs"] == 2 and len(j["jobs"]) == 2, "two jobs reported")
    check(j["ios"] == 512 and all(x["ios"] == 256 for x in j["jobs"]), "each job one pass")
    check(j["lat"]["n"] == 512, "histograms merged: %d" % j["lat"]["n"])
    # rate limits hold within 5 % over a 2 s run (rate-iops; bytes a second)
    j = run("--rw", "randread", "--bs", "4k", "--qd", "8", "--runtime", "2", "--rate-iops", "500")
    check(abs(j["iops"] / 500 - 1) < 0.05, "--rate-iops 500: %.1f IOPS" % j["iops"])
    j = run("--rw", "read", "--bs", "16k", "--qd", "4", "--runtime", "1", "--rate", "2m")
    check(abs(j["bw_MBps"] * 1e6 / (2 << 20) - 1) < 0.05, "--rate 2m: %.3f MB/s" % j["bw_MBps"])
    # a rate whose next I/O is due after --runtime ends the run at --runtime (it waited
    # for that I/O: --rate 1 --runtime 1 held a 4 KiB read for 4096 s), in bytes and I/Os
    for lim in (("--rate", "1"), ("--rate-iops", "1")):
        j = run("--rw", "read", "--bs", "4k", "--qd", "4", "--runtime", "0.3", *lim)
        check(j["ios"] == 1, "%s %s --runtime 0.3: one I/O due in the run, got %d" % (*lim, j["ios"]))
    j = run("--rw", "randread", "--bs", "4k", "--qd", "4", "--rate-iops", "2000")
    check(j["ios"] == 256, "a rate-limited pass makes all its I/Os: %d" % j["ios"])
    j = run("--rw", "randread", "--bs", "4k", "--qd", "8", "--random-distribution", "zipf:1.2")
    check(j["ios"] == 256 and j["random_map"] is False, "zipf: one pass's count, no map")
    # verify: written with headers and CRC-32C, read back; then a flipped byte is found
    j = run("--rw", "randwrite", "--bs", "4k", "--qd", "8", "--verify", "crc32c", "--force")
    check(j["ios"] == 256 and j["read_bytes"] == 0, "verify's read-back not counted: %r" % j["ios"])
    check(j["verified_blocks"] == 256, "the read-back's blocks counted: %r" % j["verified_blocks"])
    run("--rw", "randread", "--bs", "4k", "--qd", "8", "--verify", "crc32c")
    with open(f, "r+b") as fh:
        fh.seek(300001)
        b = fh.read(1)
        fh.seek(300001)
        fh.write(bytes([b[0] ^ 0x40]))
    p = subprocess.run([exe, "--file", f, "--rw", "read", "--bs", "4k", "--qd", "8", "--verify",
                        "crc32c"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 1, "a flipped byte: exit %d, expected 1" % p.returncode)
    check("offset 299008" in p.stderr and "first bad byte at offset 300001" in p.stderr and
          "0x%02x, expected 0x%02x" % (b[0] ^ 0x40, b[0]) in p.stderr,
          "the report names the block, the byte and the values: %s" % p.stderr)
    # a flipped byte of a header (the generation of the block at 65536): that byte is
    # named, not the first data byte (whose expected value came from the damaged header)
    with open(f, "r+b") as fh:
        fh.seek(300001)
        fh.write(b)
        fh.seek(65552)
        g = fh.read(1)
        fh.seek(65552)
        fh.write(bytes([g[0] ^ 0x01]))
    p = subprocess.run([exe, "--file", f, "--rw", "read", "--bs", "4k", "--qd", "8", "--verify",
                        "crc32c"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and "first bad byte at offset 65552 (the header's generation)" in
          p.stderr and "0x%02x, expected 0x%02x" % (g[0] ^ 0x01, g[0]) in p.stderr,
          "a flipped generation byte is named: %s" % p.stderr)
    with open(f, "r+b") as fh:
        fh.seek(65552)
        fh.write(g)
    # --bs ranges and splits: a random write pass with sizes of 1 to 16 grains still
    # writes every grain once (the read-back finds this run's generation in each), and
    # reads of other sizes check each grain; time-based passes wrap around
    j = run("--rw", "randwrite", "--bs", "4k-64k", "--qd", "8", "--verify", "crc32c", "--force")
    check(j["bytes"] == 1 << 20 and j["bs"] == 4096 and j["bs_max"] == 65536, "a 4k-64k pass: %r"
          % j["bytes"])
    check(j["ios"] < 200, "sizes above one grain were drawn: %d I/Os for 256 grains" % j["ios"])
    j = run("--rw", "randread", "--bs", "4k/50:32k/50", "--qd", "8", "--verify", "crc32c")
    check(j["bytes"] == 1 << 20, "a split's random pass reads the region once: %d" % j["bytes"])
    j = run("--rw", "read", "--bs", "4k-60k", "--qd", "4", "--verify", "crc32c")
    check(j["bytes"] == 1 << 20, "a range's sequential pass: %d" % j["bytes"])
    j = run("--rw", "randread", "--bs", "4k-64k", "--qd", "8", "--runtime", "0.3")
    check(j["bytes"] > 2 << 20, "time-based passes wrap: %d bytes" % j["bytes"])
    # several files: --nrfiles N names P.0 .. P.N-1, --size is their total; each I/O goes
    # to the next file; a pass covers every file
    g = os.path.join(d, "multi")
    p = subprocess.run([exe, "--file", g, "--nrfiles", "3", "--rw", "randwrite", "--bs", "4k",
                        "--qd", "8", "--size", "3m", "--verify", "crc32c", "--end-fsync", "--json"],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "--nrfiles 3: %s" % p.stderr)
    j = json.loads(p.stdout)
    names = [g + ".%d" % i for i in range(3)]
    check(j["files"] == names and j["nrfiles"] == 3, "the files: %r" % j["files"])
    check(all(os.path.getsize(n) == 1 << 20 for n in names), "each file 1 MiB")
    check(j["bytes"] == 3 << 20 and j["syncs"] == 3, "3 MiB written, an end fsync per file")
    p = subprocess.run([exe, "--json", "--rw", "randread", "--bs", "4k-16k", "--qd", "8",
                        "--verify", "crc32c"] + sum([["--file", n] for n in names], []),
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0 and json.loads(p.stdout)["bytes"] == 3 << 20,
          "three --file: one pass over each: %s" % p.stderr)
    # trim: a hole punched through every block of a pass; the file keeps its size
    t = os.path.join(d, "trim")
    with open(t, "wb") as fh:
        fh.write(os.urandom(1 << 20))
        os.fsync(fh.fileno())
    p = subprocess.run([exe, "--file", t, "--rw", "randtrim", "--bs", "64k", "--qd", "4",
                        "--force", "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode == 1 and "cannot discard" in p.stderr:
        print("note: the scratch file system punches no holes:", p.stderr.strip())
    else:
        check(p.returncode == 0, "randtrim: %s" % p.stderr)
        j = json.loads(p.stdout)
        check(j["trim_bytes"] == 1 << 20 and j["ios"] == 16, "16 trims of 64 KiB: %r" % j["ios"])
        check(j["rwmixread"] == 0, "a trim run reads nothing: rwmixread %r" % j["rwmixread"])
        check(os.stat(t).st_blocks == 0 and os.path.getsize(t) == 1 << 20,
              "trimmed: %d blocks allocated" % os.stat(t).st_blocks)
    # --hipri: polled where the device polls, else one clear line (this virtual disk: io_poll 0)
    p = subprocess.run([exe, "--file", f, "--rw", "randread", "--bs", "4k", "--qd", "4", "--direct",
                        "--hipri", "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode == 0:
        check(json.loads(p.stdout)["hipri"] is True, "--hipri reported")
    else:
        check(p.returncode == 1 and p.stderr.count("\n") == 1 and
              ("does not poll" in p.stderr or "polled I/O refused" in p.stderr),
              "--hipri refused in one line naming why: %s" % p.stderr)
    # per-interval logs: a CSV per job, about one row per 100 ms, and its plot
    run("--rw", "randread", "--bs", "4k", "--qd", "4", "--runtime", "0.5", "--numjobs", "2",
        "--log-interval", "50", "--log-prefix", os.path.join(d, "log"))
    for job in (0, 1):
        rows = open(os.path.join(d, "log.job%d.csv" % job)).read().splitlines()
        check(rows[0] == "time_s,bw_MBps,iops,lat_p50_us,lat_p99_us,lat_max_us", "CSV header")
        check(9 <= len(rows) - 1 <= 12, "about 10 intervals in 0.5 s: %d" % (len(rows) - 1))
        t = [float(r.split(",")[0]) for r in rows[1:]]
        check(t == sorted(t) and abs(t[0] - 0.05) < 0.03, "interval ends rise from 0.05 s: %r" % t[:3])
    # with a ramp: the rows start after it (they logged it as intervals of 0 I/Os, the
    # way a stall looks, on a time axis from the ramp's start)
    run("--rw", "randread", "--bs", "4k", "--qd", "4", "--runtime", "0.3", "--ramp-time", "0.2",
        "--log-interval", "50", "--log-prefix", os.path.join(d, "ramp"))
    rows = open(os.path.join(d, "ramp.job0.csv")).read().splitlines()[1:]
    t = [float(r.split(",")[0]) for r in rows]
    iops = [float(r.split(",")[2]) for r in rows]
    check(abs(t[0] - 0.05) < 0.03 and t[-1] < 0.4, "--ramp-time: rows from its end: %r" % t)
    check(min(iops) > 0, "--ramp-time: no row of 0 I/Os: %r" % iops)
    # a log that cannot be written (the file size limit standing in for a full disk):
    # exit 1 naming the CSV (it said "writing job 0's log")
    import resource

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # EFBIG, not the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, resource.RLIM_INFINITY))
    p = subprocess.run([exe, "--file", f, "--rw", "randread", "--bs", "4k", "--qd", "4",
                        "--runtime", "0.3", "--log-interval", "20", "--log-prefix",
                        os.path.join(d, "full")], capture_output=True, text=True,
                       timeout=60, preexec_fn=small_files)
    check(p.returncode == 1 and os.path.join(d, "full.job0.csv") in p.stderr and
          "File too large" in p.stderr, "a log that cannot be written: exit %d, %s" %
          (p.returncode, p.stderr))
    plot = os.path.join(os.environ.get("RF_SOURCE_ROOT", "."), "tools", "dev", "plot-iobench")
    if shutil.which("gnuplot") and os.access(plot, os.X_OK):
        png = os.path.join(d, "log.png")
        p = subprocess.run([plot, png, os.path.join(d, "log.job0.csv"), os.path.join(d, "log.job1.csv")],
                           capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and os.path.getsize(png) > 1000, "plot-iobench: %s" % p.stderr)
    # a job file: two jobs, run together; the same options as on the command line
    jf = os.path.join(d, "exp.fio")
    with open(jf, "w") as fh:
        fh.write("; two jobs\n[global]\nfilename=%s\nbs=4k\nioengine=io_uring\n\n"
                 "[seq]\nrw=read\niodepth=2\n\n[mix]\nrw=randrw\nrwmixread=70\n"
                 "iodepth=8\nnumjobs=2\nforce=1\nruntime=200ms\ntime_based=1\n" % f)
    p = subprocess.run([exe, "--job", jf, "--json"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "--job: exit %d: %s" % (p.returncode, p.stderr))
    jj = json.loads(p.stdout)
    check(len(jj["jobs"]) == 2, "two jobs in the output")
    cl = [run("--rw", "read", "--bs", "4k", "--qd", "2"),
          run("--rw", "randrw", "--rwmixread", "70", "--bs", "4k", "--qd", "8", "--numjobs", "2",
              "--force", "--runtime", "0.2")]
    for a, b in zip(jj["jobs"], cl):
        for k in ("rw", "bs", "qd", "numjobs", "rwmixread", "random_map", "direct"):
            check(a[k] == b[k], "job file vs command line: %s %r vs %r" % (k, a[k], b[k]))
    # jobs run together (their measured runs overlap); stonewall=1 waits for the ones
    # before; filename=a:b is a list, bssplit a --bs split
    with open(os.path.join(d, "par.fio"), "w") as fh:
        fh.write("[global]\nfilename=%s:%s\nbs=4k\nruntime=400ms\ntime_based=1\n"
                 "[a]\nrw=randread\niodepth=2\n"
                 "[b]\nrw=randread\nbssplit=4k/50:16k/50\niodepth=2\n[c]\nstonewall=1\n"
                 "rw=read\niodepth=2\n" % (names[0], names[1]))
    p = subprocess.run([exe, "--job", os.path.join(d, "par.fio"), "--json"], capture_output=True,
                       text=True, timeout=60)
    check(p.returncode == 0, "a job file with stonewall: %s" % p.stderr)
    a, b, c = json.loads(p.stdout)["jobs"]
    check(a["start_unix_s"] < b["end_unix_s"] and b["start_unix_s"] < a["end_unix_s"],
          "[a] and [b] ran together: %r" % [a["start_unix_s"], a["end_unix_s"], b["start_unix_s"],
                                            b["end_unix_s"]])
    check(c["start_unix_s"] >= max(a["end_unix_s"], b["end_unix_s"]), "[c] waited (stonewall)")
    check(a["files"] == names[:2] and b["bs_spec"] == "4k/50:16k/50", "filename list, bssplit")
    # as fio reads a job file: bssplit over a later bs; a comment after a value cut off
    with open(os.path.join(d, "fio.fio"), "w") as fh:
        fh.write("[x]\nfilename=%s ; the scratch file\nrw=randread\nbssplit=4k/50:16k/50\n"
                 "bs=8k # ignored by fio: bssplit wins\n" % names[0])
    p = subprocess.run([exe, "--job", os.path.join(d, "fio.fio"), "--json"],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "bssplit then bs, comments: %s" % p.stderr)
    x = json.loads(p.stdout)["jobs"][0]
    check(x["files"] == names[:1] and x["bs_spec"] == "4k/50:16k/50",
          "bssplit over bs, the comment cut: %r %r" % (x["files"], x["bs_spec"]))
    # the jobs end with the file's process: killed while two 30 s jobs run, nothing of
    # the run stays behind (a job used to run on, orphaned)
    kf = os.path.join(d, "kill.fio")
    with open(kf, "w") as fh:
        fh.write("[global]\nfilename=%s\nbs=4k\nruntime=30\ntime_based=1\n[k1]\nrw=randread\n"
                 "[k2]\nrw=randread\n" % names[0])
    # with SIGTERM ignored by whoever started it (the jobs used to inherit that, and
    # the parent's death signal, SIGTERM, then did not end them)
    p = subprocess.Popen([exe, "--job", kf], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL,
                         preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    kids = []
    for _ in range(100):  # until both jobs run (10 s at most)
        time.sleep(0.1)
        kids = [int(x) for x in subprocess.run(["pgrep", "-P", str(p.pid)],
                                               capture_output=True, text=True).stdout.split()]
        if len(kids) == 2:
            break
    check(len(kids) == 2, "two job processes started: %r" % kids)
    p.kill()
    p.wait()
    for _ in range(100):
        alive = [k for k in kids if os.path.exists("/proc/%d" % k) and
                 open("/proc/%d/stat" % k).read().split()[2] != "Z"]
        if not alive:
            break
        time.sleep(0.1)
    check(not alive, "jobs still running after their job file's process was killed: %r" % alive)
    # fio's defaults where a job file gives no iodepth or bs
    with open(kf, "w") as fh:
        fh.write("[global]\nfilename=%s\nsize=64k\n[plain]\nrw=read\n" % names[0])
    p = subprocess.run([exe, "--job", kf, "--json"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "a job file without iodepth or bs: %s" % p.stderr)
    j = json.loads(p.stdout)["jobs"][0]
    check(j["qd"] == 1 and j["bs"] == 4096, "fio's defaults: qd %r bs %r" % (j["qd"], j["bs"]))
    with open(jf, "a") as fh:
        fh.write("[bad]\nrw=read\nblocksiz=4k\n")
    p = subprocess.run([exe, "--job", jf], capture_output=True, text=True, timeout=60)
    check(p.returncode == 1 and "line 21" in p.stderr and "'blocksiz'" in p.stderr,
          "an unknown key names its line: %s" % p.stderr)
finally:
    shutil.rmtree(d, ignore_errors=True)
print("rf-iobench runs: fsync counts, histogram, percentiles, rw mix, random map: ok")
