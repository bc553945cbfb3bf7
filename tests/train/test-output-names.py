#!/usr/bin/python3
"""test-output-names.py RF_TRAIN RF_INFER: the names rf-train and rf-infer make in the
directories of their outputs, watched with inotify. Each output's write is tried before
the run (tools/cli.c: rf_cli_probe_write, rf_cli_probe_mkdir); a try that created the
name and removed it again left an empty FILE.tmp beside the checkpoint when a kill -9
came between the two (test-ckpt-kill saw it about once in 50 kills). So no name may be
removed, in any of these directories, and the only names made are the outputs and the
checkpoint's, the export's and the trace's FILE.tmp, each renamed over FILE at once."""
import ctypes, os, re, struct, subprocess, sys, tempfile

RF, INF = sys.argv[1], sys.argv[2]
DATA = os.environ.get("RF_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")
if not any(os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte" + e))
           for e in ("", ".gz")):
    print("SKIP: no Fashion-MNIST in " + DATA)
    sys.exit(77)

IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO = 0x100, 0x200, 0x40, 0x80
IN_NONBLOCK = 0o4000
libc = ctypes.CDLL(None, use_errno=True)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


class Watch:
    """inotify on some directories: the (directory, event, name) seen, in order."""

    def __init__(self, dirs):
        self.fd = libc.inotify_init1(IN_NONBLOCK)
        if self.fd < 0:
            print("SKIP: inotify_init1: " + os.strerror(ctypes.get_errno()))
            sys.exit(77)
        self.wd = {}
        for d in dirs:
            w = libc.inotify_add_watch(self.fd, d.encode(),
                                       IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO)
            if w < 0:
                fail("inotify_add_watch %s: %s" % (d, os.strerror(ctypes.get_errno())))
            self.wd[w] = d

    def events(self):
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            off = 0
            while off < len(buf):
                wd, mask, _, n = struct.unpack_from("iIII", buf, off)
                name = buf[off + 16:off + 16 + n].rstrip(b"\0").decode()
                off += 16 + n
                kind = [k for b, k in ((IN_CREATE, "create"), (IN_DELETE, "delete"),
                                       (IN_MOVED_FROM, "from"), (IN_MOVED_TO, "to"))
                        if mask & b]
                out.append((os.path.basename(self.wd.get(wd, "?")), kind[0] if kind else
                            hex(mask), name))


def run(cmd, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env, timeout=600)
    if r.returncode:
        fail("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))


def check(what, evs, allowed):
    """No name removed; each name made is one of `allowed`; a FILE.tmp made is moved.
    A trace's FILE.tmp.PID.N (written beside it, renamed over it) counts as FILE.tmp."""
    made = set()
    evs = [(d, k, re.sub(r"\.tmp\.\d+\.\d+$", ".tmp", n)) for d, k, n in evs]
    for d, kind, name in evs:
        if kind == "delete":
            fail("%s: %s/%s was removed (a try left a name that a kill -9 would keep): %s"
                 % (what, d, name, evs))
        if kind == "create":
            if name not in allowed:
                fail("%s: made %s/%s, expected only %s: %s" % (what, d, name, allowed, evs))
            made.add(name)
        if kind == "from" and not name.endswith(".tmp"):
            fail("%s: %s/%s moved away: %s" % (what, d, name, evs))
    for name in made:
        if name.endswith(".tmp") and (name not in [n for _, k, n in evs if k == "from"]):
            fail("%s: %s was made and never renamed: %s" % (what, name, evs))
    print("ok: %s: %d events, no name removed, made only %s" % (what, len(evs),
                                                                 sorted(made)))


with tempfile.TemporaryDirectory(prefix="rf-output-names.") as t:
    data = os.path.join(t, "data")
    os.mkdir(data)
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "small-fmnist.py"), DATA, data, "64", "16"],
                   check=True)
    out = os.path.join(t, "out")
    os.mkdir(out)
    w = Watch([out])
    run([RF, "--data", data, "--model", "mlp", "--epochs", "2", "--batch-size", "16",
         "--quiet", "--checkpoint", os.path.join(out, "c"), "--checkpoint-every", "1",
         "--metrics", os.path.join(out, "m.csv"), "--trace", os.path.join(out, "t2.json"),
         "--export", os.path.join(out, "exp")])
    check("rf-train --checkpoint --metrics --trace --export", w.events(),
          {"c", "c.tmp", "m.csv", "t2.json.tmp", "exp"})
    env = dict(os.environ, RF_TRACE=os.path.join(out, "trace.json"))
    # the export directory existing: its files are tried, then written through NAME.tmp
    w2 = Watch([out, os.path.join(out, "exp")])
    run([RF, "--data", data, "--model", "mlp", "--epochs", "1", "--batch-size", "16",
         "--quiet", "--checkpoint", os.path.join(out, "c"), "--resume", "--epochs", "3",
         "--export", os.path.join(out, "exp")], env)
    check("rf-train --resume, --export to a directory there", w2.events(),
          {"c.tmp", "trace.json.tmp", "model.json.tmp", "params.rfck.tmp"})
    os.unlink(os.path.join(out, "trace.json"))
    w3 = Watch([out])
    run([INF, os.path.join(out, "exp"), "--data", data, "--quiet"], env)
    check("rf-infer with RF_TRACE", w3.events(), {"trace.json.tmp"})
