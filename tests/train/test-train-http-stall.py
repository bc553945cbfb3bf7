#!/usr/bin/python3
"""test-train-http-stall RF_TRAIN RF_PACK: rf-train against an HTTP server that stalls.

A server on loopback answers the requests that open the data set, then accepts every
later request and never answers it. rf-train --data http://... is started (its SIGINT
handler in place) and, once it is waiting on the stalled reads, sent SIGINT: it must
die of the signal (measured: 0.01 s; a step stuck in a wait ends at the engine's
interrupt a second after the signal at most; the bound checked, 10 s, is far from
both that and a hang, so that a loaded machine does not fail it). Also
--http-timeout: with 300 ms the run fails by itself, its message naming the URL, and
exits about when the first read gives up, not after every prefetched batch's retries
(--prefetch 16); and with the server stalled from the start, --http-timeout 300 bounds
the open of --data, of --test-data and of the test set looked for beside an http://
--data (the message names the URL and "timeout 300 ms").
Exit 0 pass, 1 fail, 77 without Fashion-MNIST."""
import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

rf, pack = sys.argv[1], sys.argv[2]
src = os.environ.get("RF_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
if not os.path.exists(os.path.join(src, "train-images-idx3-ubyte.gz")):
    print("SKIP: no Fashion-MNIST")
    sys.exit(77)
d = tempfile.mkdtemp(prefix="rf-http-stall.")
atexit.register(shutil.rmtree, d, True)
for s in ("train", "t10k"):
    subprocess.run([pack, "--images", f"{src}/{s}-images-idx3-ubyte.gz", "--labels",
                    f"{src}/{s}-labels-idx1-ubyte.gz", "--classes", "10", "-o",
                    f"{d}/fm-{s}.rfrec"], check=True, stdout=subprocess.DEVNULL)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from stall_server import StallServer  # noqa: E402
srv = StallServer(open(f"{d}/fm-train.rfrec", "rb").read())
url = srv.url("fm-train.rfrec")
args = [rf, "--data", url, "--test-data", f"{d}/fm-t10k.rfrec", "--epochs", "1", "--quiet"]


def start(extra):
    # the open's requests are answered; then the server stalls
    srv.stall(False)
    p = subprocess.Popen(args + extra, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(1.0)
    srv.stall()
    time.sleep(1.5)
    return p


def interrupt(p, wait):
    """SIGINT to p, then up to wait seconds for it to end (killed past that): the
    seconds it took."""
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=wait)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    return time.monotonic() - t0


fails = 0
p = start(["--http-timeout", "60000"])
dt = interrupt(p, 10)
if p.returncode != -signal.SIGINT or dt > 10:
    print(f"FAIL: SIGINT against a stalled server: exit {p.returncode} after {dt:.2f} s "
          f"(want death by SIGINT)")
    fails += 1
else:
    print(f"ok: SIGINT against a stalled server: died of it after {dt:.2f} s")

p = start(["--http-timeout", "300", "--prefetch", "16"])
t0 = time.monotonic()     # the server stalls from here
try:
    p.wait(timeout=120)
except subprocess.TimeoutExpired:
    p.kill()
    p.wait()
dt = time.monotonic() - t0
err = p.stderr.read().decode()
# once a batch has failed, the prefetched ones' reads end with it: the run exits about
# when the first read gives up (4 tries x 0.3 s), not after each of 16 prefetched
# batches ran its retries out in the teardown's wait (18 x 4 x 0.3 s = 21.6 s)
if p.returncode != 1 or url not in err or dt > 10:
    print(f"FAIL: --http-timeout 300 against a stalled server: exit {p.returncode} after "
          f"{dt:.1f} s: {err[-300:]}")
    fails += 1
else:
    print(f"ok: --http-timeout 300: failed by itself after {dt:.1f} s, naming the URL")

# the server stalls from the start: --http-timeout bounds the open's own requests too,
# for --data and for --test-data (they took RF_HTTP_TIMEOUT_MS's 10 s, 40 s with the
# retries, whatever --http-timeout said); the message names the URL and the timeout
srv.stall()
for what, extra in (("--data", ["--data", url, "--test-data", f"{d}/fm-t10k.rfrec"]),
                    ("--test-data", ["--data", f"{d}/fm-t10k.rfrec", "--test-data", url]),
                    ):
    p = subprocess.run([rf, *extra, "--epochs", "1", "--quiet", "--http-timeout", "300"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    err = p.stderr.decode()
    if p.returncode == 0 or url not in err or "timeout 300 ms" not in err:
        print(f"FAIL: {what} stalled at its open, --http-timeout 300: exit {p.returncode}: "
              f"{err[-300:]}")
        fails += 1
    else:
        print(f"ok: {what} stalled at its open, --http-timeout 300: {err.strip()[-160:]}")
# with --checkpoint (rf-train's handler keeps a step whole), a Ctrl-C during a stalled
# open -- the trainer's, after the first open of the checks: 3 requests answered -- the
# open asks the engine's interrupt, so it ends a second after the signal and the run
# dies of it (it ran every retry's timeout out, 4 x 5 s, and exited 1)
srv.stall(True, after=3)
p = subprocess.Popen([rf, "--data", url, "--test-data", f"{d}/fm-t10k.rfrec", "--epochs", "1",
                      "--quiet", "--http-timeout", "5000", "--checkpoint", f"{d}/ck"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
time.sleep(0.7)
dt = interrupt(p, 60)
if p.returncode not in (130, -signal.SIGINT) or dt > 10:
    print(f"FAIL: SIGINT during a stalled open with --checkpoint: exit {p.returncode} after "
          f"{dt:.1f} s: {p.stderr.read().decode()[-200:]}")
    fails += 1
else:
    print(f"ok: SIGINT during a stalled open with --checkpoint: exit {p.returncode} after "
          f"{dt:.1f} s")
# the test set looked for beside an http:// --data (fm-t10k.rfrec beside fm-train) took
# the 10 s default -- 40 s with retries -- whatever --http-timeout said
srv.stall(True, only="t10k")
p = subprocess.run([rf, "--data", url, "--epochs", "1", "--quiet", "--http-timeout", "300"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
err = p.stderr.decode()
if p.returncode == 0 or "fm-t10k.rfrec" not in err or "timeout 300 ms" not in err:
    print(f"FAIL: the test set beside --data stalled, --http-timeout 300: exit "
          f"{p.returncode}: {err[-300:]}")
    fails += 1
else:
    print(f"ok: the test set beside --data stalled, --http-timeout 300: {err.strip()[-160:]}")
srv.close()
sys.exit(1 if fails else 0)
