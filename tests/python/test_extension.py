#!/usr/bin/python3
"""test_extension: the C extension as CPython extensions are written.

- an exception a pushed callable raises is kept: the ringflow.Error of wait() and
  wait_all() has it -- the same object, with its traceback -- as __cause__ (its text
  still in the message), and an op skipped for the poison has it too;
- a skip names the variable that held the poison (one read, several reads);
  wait_all() raises no failure a clear_error() cleared, and a clear_error() called
  while the failing op is pending clears that failure in engine order: a Var's
  error and __cause__ follow the engine's poison (wait and wait_all alike);
- an exception kept on a Var whose traceback holds that Var (a cycle) is collected;
- the types are named ringflow.X, made per module (multi-phase init), and the
  loader's C type takes its options by name only;
- a Fashion-MNIST directory (raw IDX files, or .gz) is opened by the names the library
  gives (rf_dataset_fmnist_name), split "train" and "test";
- a batch let go on another thread gives its slot back there and then (the C loader's
  rf_loader_unref, on any thread): with one slot, the next batch is refused while
  another thread keeps a view of it, and once that thread drops it -- the owner calling
  nothing in between -- the slot is free and the next batch is read into the same
  memory; a consumer thread dropping every batch while the owner reads three epochs
  (waiting without the GIL) sees each batch whole, and no slot stays held;
- the C half checks its integer arguments whole, as the Python half does (_pack's n,
  shape and num_classes: never cut to 32 bits or to 4 dims, never a bool or float);
- Engine.close() from a signal handler while a wait of that Engine turns its reactor
  is refused (EBUSY), not a free under the wait.
Prints one closing line; exit 0 or 1 (77: no numpy).
"""
import gc
import gzip
import importlib.util
import errno
import atexit
import os
import queue
import shutil
import signal
import struct
import sys
import tempfile
import threading
import time
import weakref

try:
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

import ringflow
from ringflow import _ringflow

checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        print(f"FAIL: {what}")
        sys.exit(1)


def chained():
    e = ringflow.Engine(workers=2)
    v = e.var("v")
    raised = []

    def fails():
        err = ValueError("bad value 7")
        raised.append(err)
        raise err
    e.push(fails, mutates=[v])
    try:
        e.wait(v)
        check(False, "a raising op fails its variable's wait")
    except ringflow.Error as err:
        check(isinstance(err.__cause__, ValueError), f"wait: __cause__ {err.__cause__!r}")
        check(err.__cause__ is raised[0], "wait: __cause__ is the very exception raised")
        check(err.__cause__.__traceback__ is not None, "the exception keeps its traceback")
        check("ValueError" in str(err) and "bad value 7" in str(err), f"its text: {err}")
        check(err.errno == 5, f"errno EIO: {err.errno}")
    try:
        e.wait_all()
        check(False, "wait_all reports the op that failed")
    except ringflow.Error as err:
        check(err.__cause__ is raised[0], f"wait_all: __cause__ {err.__cause__!r}")
    # an op reading the poisoned variable is skipped: the poison's exception is its cause
    w = e.var("w")
    e.push(lambda: None, reads=[v], mutates=[w])
    try:
        e.wait(w)
        check(False, "an op reading a poisoned variable is skipped")
    except ringflow.Error as err:
        check("skipped" in str(err) and err.__cause__ is raised[0],
              f"skipped: {err}, __cause__ {err.__cause__!r}")
    try:
        e.wait_all()
    except ringflow.Error:
        pass
    v.clear_error()
    w.clear_error()
    e.push(lambda: None, reads=[v], mutates=[w])
    e.wait(w)
    e.wait_all()
    # another exception type, raised by a callable pushed by name
    x = e.var(name="x")
    e.push(fn=lambda: {}["missing"], mutates=[x])
    try:
        e.wait(var=x)
        check(False, "a KeyError fails the wait")
    except ringflow.Error as err:
        check(type(err.__cause__) is KeyError, f"KeyError kept: {err.__cause__!r}")
    try:
        e.wait_all()
    except ringflow.Error:
        pass


def poison_state():
    e = ringflow.Engine(workers=2)
    a, b, c, d = e.var("a"), e.var("b"), e.var("c"), e.var("d")

    def boom():
        raise ValueError("boom")

    def raised(var):
        try:
            e.wait(var)
        except ringflow.Error as err:
            return err
        check(False, f"wait({var.name}) raises")

    # a skip names the variable it reads that held the poison: one read, several
    e.push(boom, mutates=[a])
    e.push(lambda: None, reads=[a], mutates=[b])
    err = raised(b)
    check("reads ('a')" in str(err) and "ValueError: boom" in str(err) and
          type(err.__cause__) is ValueError, f"skip names the read a: {err}")
    e.push(lambda: None, reads=[c, d, a], mutates=[c])
    err = raised(c)
    check("reads ('a')" in str(err), f"of reads c, d, a, a poisoned: names a: {err}")
    e.push(lambda: None, reads=[d, b, a], mutates=[d])
    check("reads ('b')" in str(raised(d)), "of reads d, b, a, b and a poisoned: the first, b")
    e.push(lambda: None, reads=[a], mutates=[b, d])
    check("reads ('a')" in str(raised(b)), "b keeps its first cause")
    # wait_all after wait and clear_error: nothing cleared is raised again
    check(raised(a).__cause__ is err.__cause__, "a's own failure")
    for v in (a, b, c, d):
        v.clear_error()
    e.push(lambda: None, mutates=[d])
    e.wait(d)
    check(e.wait_all() is None, "wait_all after the failure was cleared: None")
    # not cleared: wait_all raises it once, after a wait raised it too
    e.push(boom, mutates=[a])
    raised(a)
    try:
        e.wait_all()
        check(False, "wait_all raises a failure not cleared")
    except ringflow.Error as err:
        check("ValueError: boom" in str(err), f"wait_all: {err}")
    check(e.wait_all() is None, "and only once")
    a.clear_error()
    e.wait(a)

    # failures kept for wait_all are bounded (a program that never calls it must not
    # keep every exception and traceback): 100 on 100 Vars; each Var's wait raises its
    # own; all cleared, wait_all still says that 36 failed beyond the 64 kept (a
    # failure not kept cannot be told cleared), once
    vs = [e.var(f"v{i}") for i in range(100)]
    for i, v in enumerate(vs):
        e.push(lambda i=i: (_ for _ in ()).throw(ValueError(f"boom {i}")), mutates=[v])
    for i, v in enumerate(vs):
        check(f"boom {i}" in str(raised(v)), f"v{i}'s own failure")
    for v in vs:
        v.clear_error()
    try:
        e.wait_all()
        check(False, "wait_all after failures beyond those kept")
    except ringflow.Error as err:
        check("36 ops failed beyond the 64" in str(err), f"wait_all, unkept failures: {err}")
    check(e.wait_all() is None, "said once")

    # clear_error() while the failing op is pending: in engine order, after it
    f, g = e.var("f"), e.var("g")

    def late():
        time.sleep(0.2)
        raise ValueError("late")

    def new():
        raise KeyError("new")
    for waiter in ("wait", "wait_all"):
        e.push(late, mutates=[f])
        f.clear_error()
        check((e.wait(f) if waiter == "wait" else e.wait_all()) is None,
              f"{waiter}: the late failure cleared by the clear pushed after it")
        e.push(new, mutates=[g])
        e.push(lambda: None, reads=[g], mutates=[f])
        err = raised(f)
        check("reads ('g')" in str(err) and type(err.__cause__) is KeyError and
              "late" not in str(err), f"{waiter}: f's error is the current one: {err}, "
              f"{err.__cause__!r}")
        try:
            e.wait_all()
            check(False, f"{waiter}: wait_all raises the new failure")
        except ringflow.Error as err:
            check(type(err.__cause__) is KeyError and "late" not in str(err),
                  f"{waiter}: wait_all: {err}, {err.__cause__!r}")
        f.clear_error()
        g.clear_error()
        e.wait_all()
    # a clear pushed before a failure does not clear it
    f.clear_error()
    e.push(boom, mutates=[f])
    check(type(raised(f).__cause__) is ValueError, "a failure after the clear stays")
    f.clear_error()
    e.close()


class Token:
    pass


def cycle():
    """A Var whose kept exception's traceback holds the Var: collected by gc."""
    e = ringflow.Engine(workers=1)
    v = e.var("v")
    tok = Token()

    def fails():
        held = (v, tok)      # this frame, in the traceback, holds the Var
        raise ValueError(len(held))
    e.push(fails, mutates=[v])
    try:
        e.wait(v)
    except ringflow.Error:
        pass
    try:
        e.wait_all()
    except ringflow.Error:
        pass
    return weakref.ref(tok)


def idx(path, magic, dims, data, gz):
    raw = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in dims) + data
    with (gzip.open if gz else open)(path + (".gz" if gz else ""), "wb") as f:
        f.write(raw)


def first_pixel(x):
    return int(np.rint(np.from_dlpack(x)[0, 0, 0] * 255))


def dlpack_args(T):
    """__dlpack__'s keyword arguments as the array API gives them: a host batch takes
    stream=None only (BufferError else), a stream that is no int a TypeError, copy=True
    a BufferError; the capsule of a good call is taken by numpy."""
    with ringflow.Loader(T, 8, shuffle=False, prefetch=1) as l:
        x, y = next(l)
        check(x.__dlpack_device__() == (1, 0), f"a host batch: {x.__dlpack_device__()}")
        for s, err in ((0, BufferError), (1, BufferError), (-1, BufferError),
                       ("a", TypeError), (True, TypeError), (1.0, TypeError)):
            try:
                x.__dlpack__(stream=s)
                check(False, f"__dlpack__(stream={s!r}) of a host batch was taken")
            except err as e:
                check("stream" in str(e), f"stream={s!r}: {e}")
        try:
            x.__dlpack__(copy=True)
            check(False, "copy=True taken")
        except BufferError:
            pass
        x.__dlpack__(stream=None)
        check(np.from_dlpack(x).shape == (8, 28, 28), "numpy takes it")
        del x, y


def released_elsewhere(T):
    """T: the Fashion-MNIST directory of main() (40 training images, pixel k of the set
    k % 251): batch k starts with (k * 8 * 784) % 251."""
    l = ringflow.Loader(T, 8, shuffle=False, prefetch=1, hold=0)
    x, y = next(l)
    a = np.from_dlpack(x)
    where = a.ctypes.data
    go, dropped = threading.Event(), threading.Event()
    box = [x, y, a]
    del x, y, a

    def keeper():
        go.wait()
        box.clear()                      # the last references: freed on this thread
        dropped.set()
    t = threading.Thread(target=keeper)
    t.start()
    check(l.held_slots() == 1, f"another thread's view holds the one slot: {l.held_slots()}")
    try:
        next(l)
        check(False, "the only slot is another thread's: refused")
    except ringflow.Error as err:
        check(err.errno == errno.EBUSY, f"EBUSY while another thread keeps the batch: {err}")
    go.set()
    dropped.wait()
    check(l.held_slots() == 0, f"let go on the other thread: free at once ({l.held_slots()})")
    t.join()
    x, y = next(l)
    check(np.from_dlpack(x).ctypes.data == where and first_pixel(x) == (8 * 784) % 251,
          "the next batch is read into the slot let go on the other thread")
    del x, y
    l.close()

    # a consumer thread drops every batch as the owner reads on (three epochs)
    l = ringflow.Loader(T, 8, shuffle=False, prefetch=2, hold=1)
    q, bad, firsts = queue.Queue(), [], []

    def consumer():
        while True:
            b = q.get()
            if b is None:
                return
            k, x, y = b
            if first_pixel(x) != (k * 8 * 784) % 251 or \
                    np.from_dlpack(y).tolist() != [(k * 8 + i) % 10 for i in range(8)]:
                bad.append(k)
            firsts.append(k)
            del b, x, y                  # freed here, while the owner may be waiting
    t = threading.Thread(target=consumer)
    t.start()
    busy = 0
    for ep in range(3):
        k = 0
        while True:
            try:
                b = next(l, None)
            except ringflow.Error as err:
                check(err.errno == errno.EBUSY, f"only EBUSY: {err}")
                busy += 1
                time.sleep(0.001)        # every slot is the consumer's: it lets one go
                continue
            if b is None:
                break
            q.put((k, b[0], b[1]))
            del b
            k += 1
        check(k == 5, f"epoch {ep}: {k} batches")
    q.put(None)
    t.join()
    check(not bad and firsts == [k for _ in range(3) for k in range(5)],
          f"15 batches reach the consumer whole, in order: bad {bad}, {firsts}")
    check(l.held_slots() == 0, f"every batch let go on the consumer's thread: {l.held_slots()}")
    l.close()


def c_arguments(T):
    """_pack, the C half of ringflow.pack, called as the package does and with what it
    would never pass: each integer whole, in its range, named."""
    path = os.path.join(T, "c.rfrec")
    good = dict(path=path, images=bytes(range(8)), n=2, shape=(4,), labels=None, num_classes=0)
    for kw, exc, name in ((dict(n=True), TypeError, "n"), (dict(n=2.0), TypeError, "n"),
                          (dict(n=-1), ValueError, "n=-1"), (dict(n=0), ValueError, "n=0"),
                          (dict(n=2**64 + 2), OverflowError, "n="),
                          (dict(shape=(2**32 + 4,)), ValueError, "shape[0]=4294967300"),
                          (dict(shape=(2, 2**32 + 2)), ValueError, "shape[1]"),
                          (dict(shape=(0,)), ValueError, "shape[0]=0"),
                          (dict(shape=(True,)), TypeError, "shape[0]"),
                          (dict(shape=(4.0,)), TypeError, "shape[0]"),
                          (dict(shape=("4",)), TypeError, "shape[0]"),
                          (dict(shape=(1,) * 5), ValueError, "1 to 4 record dims"),
                          (dict(shape=()), ValueError, "1 to 4 record dims"),
                          (dict(shape=(2**32 - 1,) * 4), ValueError, "shape"),
                          (dict(num_classes=2**32 + 3), ValueError, "num_classes=4294967299"),
                          (dict(num_classes=-5), ValueError, "num_classes=-5"),
                          (dict(num_classes=True), TypeError, "num_classes"),
                          (dict(num_classes="10"), TypeError, "num_classes"),
                          (dict(shape=(3,)), ValueError, "records of 3 bytes")):
        try:
            _ringflow._pack(**dict(good, **kw))
            check(False, f"_pack({kw}) refused")
        except exc as e:
            check(name in str(e) and not os.path.exists(path),
                  f"_pack({kw}): {type(e).__name__} naming {name}: {e}")
    _ringflow._pack(**dict(good, n=np.int64(2), shape=(np.int64(2), 2)))
    check(os.path.getsize(path) > 0, "_pack takes numpy integers")
    check(_ringflow._MAX_RECORD_DIMS == 4 and _ringflow._MAX_EPOCH == 2**63 - 1,
          f"the limits: {_ringflow._MAX_RECORD_DIMS}, {_ringflow._MAX_EPOCH}")


def close_in_handler():
    """A signal handler runs inside a wait (the interrupt check): its close() of the
    waiting Engine is refused, the wait ends as usual, and close() works after it."""
    import signal
    e = ringflow.Engine(workers=1)
    v = e.var("v")
    gate, got, ran = threading.Event(), [], []

    def handler(sig, frame):
        try:
            e.close()
            got.append("closed")
        except ringflow.Error as err:
            got.append(err)
    old = signal.signal(signal.SIGUSR1, handler)
    try:
        e.push(lambda: (gate.wait(10), ran.append(1)), mutates=[v])
        threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGUSR1)).start()
        threading.Timer(0.6, gate.set).start()
        e.wait(v)
    finally:
        signal.signal(signal.SIGUSR1, old)
    check(len(got) == 1 and isinstance(got[0], ringflow.Error) and got[0].errno == errno.EBUSY,
          f"close() in a handler during wait: EBUSY: {got}")
    check(ran == [1], "the wait ends when its op is done")
    e.push(lambda: ran.append(2), mutates=[v])
    e.close()
    check(ran == [1, 2], "close() after the wait runs what was pushed")


def threads_of_process():
    return len(os.listdir("/proc/self/task"))


def dropped_pending():
    """An Engine let go with ops pushed and never waited for: each op holds its Vars,
    each Var its Engine, and nothing turns the Engine's reactor to finish them -- a
    cycle only the collector can find. Collected, the Engine runs what was pushed
    (what close() does) and its threads, ring and Vars go."""
    before = threads_of_process()
    ran, refs = [], []
    for k in range(3):
        e = ringflow.Engine(workers=2)
        v, w = e.var("v"), e.var("w")
        gate = threading.Event()
        tok = Token()
        e.push(lambda: gate.wait(10), mutates=[v])          # running on a worker
        e.push(lambda k=k, tok=tok: ran.append(k), reads=[v], mutates=[w])  # queued
        v.clear_error()                                     # a clear_error queued too
        refs.append(weakref.ref(tok))
        gate.set()
        del e, v, w, tok
    gc.collect()
    check(sorted(ran) == [0, 1, 2], f"a collected Engine ran what was pushed: {ran}")
    check(all(r() is None for r in refs),
          f"what the ops held is collected: {[r() is None for r in refs]}")
    after = threads_of_process()
    check(after <= before, f"their worker threads are gone: {before} -> {after}")
    # the same, let go inside a function that made a cycle of its own
    def make():
        e = ringflow.Engine(workers=1)
        v = e.var("v")
        box = {"e": e, "tok": Token()}
        e.push(lambda: box.setdefault("ran", 1), mutates=[v])
        box["self"] = box
        return weakref.ref(box["tok"])
    r = make()
    gc.collect()
    check(r() is None, "an Engine in a cycle of the user's, with an op pending: collected")
    # found by a collection on another thread: left (its ring is this thread's, and
    # that collection clears the callables), finished by the next one here
    def made():
        e = ringflow.Engine(workers=1)
        v = e.var("v")
        gate = threading.Event()
        tok = Token()
        e.push(lambda: gate.wait(10), mutates=[v])
        for _ in range(3):
            e.push(lambda tok=tok: tok.__class__, mutates=[v])
        return weakref.ref(tok), gate
    r, gate = made()
    t = threading.Thread(target=gc.collect)
    t.start()
    t.join()
    mid = threads_of_process()
    gate.set()
    time.sleep(0.05)        # the worker passes the callables the collection cleared
    gc.collect()
    check(r() is None, "collected on another thread, then on its own")
    after = threads_of_process()
    check(after < mid and after <= before,
          f"its worker thread left by the other thread's collection, gone after this "
          f"thread's: {before} -> {mid} -> {after}")


def stalled_open():
    """Opening a Loader on a server that never answers (a listening socket nobody
    accepts on), with an hour's timeout: Ctrl-C ends it (the open's wait asks
    Python's handlers), as it ends a wait of next()."""
    import socket
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    url = "http://127.0.0.1:%d/x.rfrec" % srv.getsockname()[1]
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:      # (without it: an hour, past the test's timeout)
        ringflow.Loader(url, 8, timeout=3600)
        check(False, "a stalled open returned")
    except KeyboardInterrupt:
        pass
    srv.close()


EXIT_SCRIPTS = {
    # ops pending at the end of the script, with and without Vars: they run, and the
    # interpreter ends (a worker asking for the GIL once it finalizes is ended: the
    # Engine's close would wait for it forever)
    "no Vars": """
e = ringflow.Engine(workers=1)
e.push(lambda: time.sleep(0.2))
e.push(lambda: print("ran", flush=True))
""",
    "Vars": """
e = ringflow.Engine(workers=2)
v = e.var("v")
e.push(lambda: time.sleep(0.2), mutates=[v])
e.push(lambda: print("ran", flush=True), reads=[v])
v.clear_error()
""",
    "let go": """
e = ringflow.Engine(workers=1)
v = e.var("v")
e.push(lambda: time.sleep(0.2), mutates=[v])
e.push(lambda: print("ran", flush=True), mutates=[v])
del e, v
""",
    # made on a thread that has ended: not this thread's to close (left, as documented:
    # its pending callable is not called, and the interpreter still exits cleanly)
    "another thread's": """
import threading
def make():
    global e
    e = ringflow.Engine(workers=1)
    v = e.var("v")
    e.push(lambda: time.sleep(3), mutates=[v])   # still asleep when the exit comes
    e.push(lambda: print("late", flush=True), mutates=[v])
    print("ran", flush=True)
t = threading.Thread(target=make)
t.start()
t.join()
""",
}


def exit_with_pending():
    import subprocess
    for name, body in EXIT_SCRIPTS.items():
        src = "import time, warnings, ringflow\nwarnings.simplefilter('ignore')\n" + body
        env = dict(os.environ)
        if "thread" in name:   # its worker is left, as documented (under TSan: a leak)
            env["TSAN_OPTIONS"] = env.get("TSAN_OPTIONS", "") + " report_thread_leaks=0"
        try:
            p = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True,
                               timeout=60, env=env)
            out, err = (p.returncode, p.stdout.strip()), p.stderr
        except subprocess.TimeoutExpired as e:
            out, err = "hung (60 s)", str(e.stderr or "")
        check(out == (0, "ran"), f"a script ending with ops pending ({name}): the ops run, "
              f"the interpreter exits: {out} {err[-2000:] if out != (0, 'ran') else ''}")


def main():
    chained()
    r = cycle()
    gc.collect()
    check(r() is None, "a Var, its exception and the traceback holding it are collected")

    # names: one prefix, and a module made by multi-phase initialisation
    for t in (_ringflow._Loader, _ringflow.Tensor, _ringflow.Engine, _ringflow.Var):
        check(t.__module__ == "ringflow", f"{t.__qualname__}: module {t.__module__}")
    check(ringflow.Error.__module__ == "ringflow", "ringflow.Error")
    check(_ringflow.Engine is ringflow.Engine, "the package's types are the module's")
    # a second instance of the module has its own state: its own types and Error
    spec = _ringflow.__spec__
    m2 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m2)
    check(m2.Engine is not _ringflow.Engine and m2.Error is not ringflow.Error,
          "a second module instance: types of its own (module state, not static globals)")
    e2 = m2.Engine(workers=1)
    v2 = e2.var("v2")
    e2.push(lambda: 1 // 0, mutates=[v2])
    try:
        e2.wait(v2)
        check(False, "the second module's engine fails the wait")
    except m2.Error as err:
        check(not isinstance(err, ringflow.Error) and isinstance(err.__cause__, ZeroDivisionError),
              f"the second module raises its own Error: {type(err)}, {err.__cause__!r}")
    try:
        e2.wait_all()
    except m2.Error:
        pass
    del e2, v2, m2
    T = tempfile.mkdtemp(prefix="rf-python-ext.")
    atexit.register(shutil.rmtree, T, True)   # the files made, gone at exit
    try:
        _ringflow._Loader(os.path.join(T, "x.rfrec"), 16, True)
        check(False, "the C loader's options are by name only")
    except TypeError as err:
        check("positional" in str(err), f"a third positional argument refused: {err}")

    # a Fashion-MNIST directory: the training set raw, the test set gzip'd
    n = {"train": 40, "test": 24}
    for split, gz in (("train", False), ("test", True)):
        pre = "train" if split == "train" else "t10k"
        px = (np.arange(n[split] * 28 * 28) % 251).astype(np.uint8)
        idx(os.path.join(T, f"{pre}-images-idx3-ubyte"), 0x803, (n[split], 28, 28),
            px.tobytes(), gz)
        lab = (np.arange(n[split]) % 10).astype(np.uint8)
        idx(os.path.join(T, f"{pre}-labels-idx1-ubyte"), 0x801, (n[split],), lab.tobytes(), gz)
    for split in ("train", "test"):
        with ringflow.Loader(T, 8, shuffle=False, split=split) as l:
            seen = 0
            for x, y in l:
                a = np.rint(np.from_dlpack(x) * 255).astype(np.int64)
                first = (seen * 28 * 28) % 251
                check(a.shape == (8, 28, 28) and a[0, 0, 0] == first,
                      f"{split}: batch at {seen}: {a.shape}, {a[0, 0, 0]} (want {first})")
                check(np.from_dlpack(y).tolist() == [(seen + i) % 10 for i in range(8)],
                      f"{split}: labels at {seen}")
                seen += 8
                del x, y, a
            check(seen == n[split], f"{split}: {seen} records, want {n[split]}")
    released_elsewhere(T)
    dlpack_args(T)
    c_arguments(T)
    close_in_handler()
    poison_state()
    dropped_pending()
    exit_with_pending()
    stalled_open()
    print(f"ringflow extension: {checks} checks passed")


if __name__ == "__main__":
    main()
