#!/usr/bin/python3
"""test_ringflow: the Python package, end to end (Debian's python3, torch, numpy).

- pack() writes a .rfrec the Loader reads back byte for byte (records tagged with
  their index), refusing bad arrays with ValueError;
- every epoch is each record once, in an order fixed by (seed, epoch), another each
  epoch; ranks' shards of each batch partition it;
- batches are zero-copy (torch and numpy see the same memory) and safe: 3 batches held
  as torch tensors keep their bytes while 20 more are read; with every slot held the
  loader says so (ringflow.Error EBUSY) instead of overwriting;
- state_dict()/load_state_dict(): stopped after k batches (every k of a small epoch)
  and restored in a new Loader -- and for some k in a new process -- the union is the
  epoch, each record exactly once; a state of another order is refused;
- errors: a missing file, a corrupt one, a truncated one, a failing read (at its batch),
  a call from another thread -- ringflow.Error with errno and the C text naming the
  file; never a crash;
- RecordDataset in a torch DataLoader with 0 and 2 workers, 2 ranks: each record once;
  len() the batches yielded (num_workers= given), a TypeError without it, a DataLoader
  of another worker count refused;
- Engine: push/wait/wait_all with reads and mutates, Python callables on workers, an
  exception surfacing at wait() with its text.
Prints one closing line; exit 0 or 1 (77: no torch/numpy).
"""
import errno
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

import ringflow
import ringflow.torch as rtorch

MP = "forkserver"   # the DataLoader workers' start method (see RecordDataset's check)


def main():
    global checks
    T = tempfile.mkdtemp(prefix="rf-python.")
    atexit.register(shutil.rmtree, T, True)   # the files made, gone at exit
    N, SHAPE = 1000, (4, 4)
    checks = 0


    def check(cond, what):
        global checks
        checks += 1
        if not cond:
            print(f"FAIL: {what}")
            sys.exit(1)


    def make(path, n=N):
        imgs = np.zeros((n,) + SHAPE, dtype=np.uint8)
        for i in range(n):
            flat = imgs[i].reshape(-1)
            flat[0], flat[1] = i & 255, i >> 8
            flat[2:] = (i * 7 + np.arange(flat.size - 2)) % 256
        labels = np.arange(n) % 10
        ringflow.pack(path, imgs, labels, num_classes=10)
        return imgs, labels


    def ids(x):
        a = np.rint(np.from_dlpack(x) * 255.0).astype(np.int64)
        return (a[:, 0, 0] + 256 * a[:, 0, 1]).tolist()


    path = os.path.join(T, "r.rfrec")
    imgs, labels = make(path)

    # pack: round trip and refusals
    with ringflow.Loader(path, 64, shuffle=False) as l:
        x, y = next(l)
        got = np.rint(np.from_dlpack(x) * 255).astype(np.uint8)
        check(np.array_equal(got, imgs[:64]) and np.array_equal(np.from_dlpack(y), labels[:64]),
              "pack then Loader(shuffle=False): the first 64 records, bytes and labels")
        del x, y
    # the end of a `with` whose batch is still referenced: the Loader stays open (the
    # batch's memory is its), with a ResourceWarning saying so, and closes once let go
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ringflow.Loader(path, 64, shuffle=False) as l:
            kept, ky = next(l)
        first = ids(kept)[:2]
    msgs = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    check(len(msgs) == 1 and "not closed at the end of `with`" in msgs[0] and
          "still referenced" in msgs[0] and first == [0, 1],
          f"with + a kept batch: one ResourceWarning, the batch readable: {msgs} {first}")
    del kept, ky
    l.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ringflow.Loader(path, 64, shuffle=False) as l:
            x, y = next(l)
            del x, y
    check(not [w for w in caught if issubclass(w.category, ResourceWarning)],
          "with, every batch dropped: no warning")
    for bad in (np.zeros((3, 4), np.float32), np.zeros((3,), np.uint8), np.array(5, np.uint8)):
        try:
            ringflow.pack(os.path.join(T, "bad.rfrec"), bad)
            check(False, "pack refuses a non-u8 or record-less array")
        except ValueError as e:   # its own shape named (a 0-d one said "1 dims")
            check(f"shape {bad.shape}:" in str(e), f"pack of {bad.dtype} {bad.shape}: {e}")
    try:
        ringflow.pack(os.path.join(T, "bad.rfrec"), imgs[:5], [0, 1, 2, 3, 99], num_classes=10)
        check(False, "pack refuses a label outside num_classes")
    except ringflow.Error as e:
        check("99" in str(e), f"pack's label refusal names it: {e}")
    # pack's arguments are never guessed: num_classes whole (not cut to 32 bits, not a
    # bool, float or string taken for an int), in 0..2^31-1 (i32 labels); nothing written
    gone = os.path.join(T, "never.rfrec")
    for nc, exc in ((2**40, ValueError), (2**32 + 3, ValueError), (2**32, ValueError),
                    (2**31, ValueError), (-5, ValueError), (-2**63, ValueError),
                    (2**64, OverflowError), (-2**70, OverflowError), ("10", TypeError),
                    (2.9, TypeError), (10.0, TypeError), (True, TypeError), (False, TypeError),
                    (None, TypeError), (np.float64(3), TypeError)):
        for labs in (labels[:5], None):
            try:
                ringflow.pack(gone, imgs[:5], labs, num_classes=nc)
                check(False, f"pack(num_classes={nc!r}) refused")
            except exc as e:
                check("num_classes" in str(e) and (exc is TypeError or "2147483647" in str(e))
                      and not os.path.exists(gone),
                      f"pack(num_classes={nc!r}): {type(e).__name__} naming it and its range: {e}")
    # a class count without labels is refused (it was written into the file), here and
    # by the C writer under it
    try:
        ringflow.pack(gone, imgs[:5], None, num_classes=10)
        check(False, "pack(labels=None, num_classes=10) refused")
    except ValueError as e:
        check("num_classes=10 without labels" in str(e) and not os.path.exists(gone),
              f"pack(labels=None, num_classes=10): {e}")
    try:
        from ringflow import _ringflow as _rfc
        _rfc._pack(path=gone, images=imgs[:5].tobytes(), n=5, shape=imgs.shape[1:],
                   labels=None, num_classes=10)
        check(False, "_pack(labels=None, num_classes=10) refused")
    except ringflow.Error as e:
        check("without labels has no classes" in str(e) and not os.path.exists(gone),
              f"_pack(labels=None, num_classes=10): {e}")
    for nc in (np.int64(10), 2**31 - 1):
        ringflow.pack(gone, imgs[:5], labels[:5], num_classes=nc)
        with ringflow.Loader(gone, 5, shuffle=False) as l:
            x, y = next(l)
            check(np.from_dlpack(y).tolist() == labels[:5].tolist(), f"num_classes={nc!r} packs")
            del x, y
    try:
        ringflow.pack(gone, imgs[:5], labels[:5], num_classes=np.int64(3))
        check(False, "a numpy num_classes is checked as any int")
    except ringflow.Error as e:
        check("out of range" in str(e), f"labels against num_classes=np.int64(3): {e}")
    # records of more dims than a record file keeps (RF_DS_MAX_DIMS, 4) are refused
    # as such, not cut to their first 4 dims; 1 to 4 record dims are written whole
    for shape in ((2, 2, 2, 2, 2, 2), (3, 1, 1, 1, 1, 1, 1), (2, 3, 2, 2, 2, 2, 2, 2)):
        try:
            ringflow.pack(gone, np.zeros(shape, np.uint8))
            check(False, f"pack of records of {len(shape) - 1} dims refused")
        except ValueError as e:
            check("at most 4 record dims" in str(e) and str(len(shape) - 1) in str(e),
                  f"records of {len(shape) - 1} dims: {e}")
    for shape in ((3, 5), (3, 2, 5), (3, 2, 2, 5), (3, 2, 2, 2, 5)):
        ringflow.pack(gone, np.arange(np.prod(shape), dtype=np.uint8).reshape(shape))
        check(os.path.getsize(gone) > 0, f"records of {len(shape) - 1} dims packed")
    for bad in (np.zeros((0, 4), np.uint8), np.zeros((3, 0), np.uint8),
                np.zeros((3, 2, 0), np.uint8)):
        try:
            ringflow.pack(os.path.join(T, "bad.rfrec"), bad)
            check(False, f"pack refuses images of shape {bad.shape}")
        except ValueError as e:
            check("shape" in str(e) and str(bad.shape) in str(e), f"shape {bad.shape}: {e}")
    for bad in (None, 3, b"x.rfrec"):
        try:
            ringflow.pack(bad, imgs[:5])
            check(False, f"pack(path={bad!r}) refused")
        except TypeError as e:
            check("path" in str(e), f"pack(path={bad!r}): {e}")

    # orders: each record once per epoch, fixed by (seed, epoch)
    def epoch_ids(l):
        out = []
        for x, y in l:
            out += ids(x)
        return out

    l = ringflow.Loader(path, 64, seed=5)
    e0, e1 = epoch_ids(l), epoch_ids(l)
    check(sorted(e0) == list(range(N)) and sorted(e1) == list(range(N)), "each epoch: every record once")
    check(e0 != e1, "a new order each epoch")
    check(epoch_ids(ringflow.Loader(path, 64, seed=5)) == e0, "the same order for the same seed")
    check(epoch_ids(ringflow.Loader(path, 64, seed=5, epoch=1)) == e1, "epoch=1 gives epoch 1's order")
    check(len(l) == (N + 63) // 64, "len() is batches per epoch")
    r0 = [ids(x) for x, _ in ringflow.Loader(path, 64, seed=5, rank=0, world=2)]
    r1 = [ids(x) for x, _ in ringflow.Loader(path, 64, seed=5, rank=1, world=2)]
    check(all(sorted(a + b) == sorted(e0[64 * i:64 * i + 64]) for i, (a, b) in enumerate(zip(r0, r1))),
          "two ranks' shards partition each batch of the single-process order")

    # zero-copy and lifetime
    l = ringflow.Loader(path, 64, seed=3, prefetch=2, hold=4)
    held, copies = [], []
    for i in range(3):
        x, y = next(l)
        t = torch.from_dlpack(x)
        check(t.data_ptr() == np.from_dlpack(x).ctypes.data, "torch and numpy see the same memory")
        held.append((t, torch.from_dlpack(y)))
        copies.append((t.clone(), held[-1][1].clone()))
        del x, y
    check(l.held_slots() == 3, f"3 batches held: {l.held_slots()} slots")
    for i in range(20):                     # across the epoch's end: next() ends it once
        b = next(l, None) or next(l)
        del b
    check(all(torch.equal(h[0], c[0]) and torch.equal(h[1], c[1]) for h, c in zip(held, copies)),
          "3 held batches keep their bytes while 20 more are read")
    del held, t
    check(l.held_slots() == 0, "released when the tensors go")
    l1 = ringflow.Loader(path, 64, seed=3, prefetch=1, hold=0)
    keep = next(l1)
    try:
        next(l1)
        check(False, "every slot held: refused")
    except ringflow.Error as e:
        check(e.errno == errno.EBUSY and "hold=" in str(e), f"every slot held: EBUSY: {e}")
    del keep
    check(len(ids(next(l1)[0])) == 64, "and goes on once the batch is let go")

    # exactly-once resume, every k of a 16-batch epoch
    small = os.path.join(T, "s.rfrec")
    make(small, 250)
    full = epoch_ids(ringflow.Loader(small, 16, seed=9, epoch=2))
    for k in range(0, 17):
        a = ringflow.Loader(small, 16, seed=9, epoch=2)
        first = []
        for _ in range(k):
            first += ids(next(a)[0])
        st = a.state_dict()
        b = ringflow.Loader(small, 16, seed=9)
        b.load_state_dict(st)
        rest = epoch_ids(b)
        check(first + rest == full, f"stopped after {k} batches and restored: the epoch, each record once")
    for k in (1, 7, 15):
        a = ringflow.Loader(small, 16, seed=9, epoch=2)
        first = []
        for _ in range(k):
            first += ids(next(a)[0])
        code = ("import sys, json, numpy as np, ringflow\n"
                "l = ringflow.Loader(sys.argv[1], 16, seed=9)\n"
                "l.load_state_dict(json.loads(sys.argv[2]))\n"
                "out = []\n"
                "for x, y in l:\n"
                "    a = np.rint(np.from_dlpack(x) * 255.0).astype(np.int64)\n"
                "    out += (a[:, 0, 0] + 256 * a[:, 0, 1]).tolist()\n"
                "print(json.dumps(out))\n")
        import json
        r = subprocess.run([sys.executable, "-c", code, small, json.dumps(a.state_dict())],
                           capture_output=True, text=True, env=os.environ)
        check(r.returncode == 0, f"resume in a new process: {r.stderr[-300:]}")
        check(first + json.loads(r.stdout) == full, f"after {k} batches, in a new process: each record once")
    try:
        ringflow.Loader(small, 16, seed=10).load_state_dict(a.state_dict())
        check(False, "a state of another seed is refused")
    except ValueError as e:
        check("seed" in str(e), f"refusal names the seed: {e}")

    # errors carry the C text
    try:
        ringflow.Loader(os.path.join(T, "none.rfrec"), 8)
        check(False, "a missing file is refused")
    except ringflow.Error as e:
        check(e.errno == errno.ENOENT and "none" in str(e), f"missing: {e}")
    junk = os.path.join(T, "junk.rfrec")
    with open(junk, "wb") as f:
        f.write(b"not a record file" * 300)
    try:
        ringflow.Loader(junk, 8)
        check(False, "a corrupt file is refused")
    except ringflow.Error as e:
        check("junk.rfrec" in str(e), f"corrupt: {e}")
    trunc = os.path.join(T, "trunc.rfrec")
    with open(small, "rb") as f:
        data = f.read()
    with open(trunc, "wb") as f:
        f.write(data[:-2000])
    try:
        ringflow.Loader(trunc, 16)
        check(False, "a truncated file is refused")
    except ringflow.Error as e:
        check("trunc.rfrec" in str(e), f"truncated: {e}")
    # a read that fails (the ring injects EIO): the error surfaces at the batch, naming the
    # file and offset, and the process goes on
    code = ("import ringflow, sys\n"
            "l = ringflow.Loader(sys.argv[1], 16, shuffle=False)\n"
            "try:\n"
            "    next(l)\n"
            "    print('no error')\n"
            "except ringflow.Error as e:\n"
            "    print('error', e.errno, e)\n")
    env = dict(os.environ, RF_FAULT_INJECT="eio=1")
    r = subprocess.run([sys.executable, "-c", code, small], capture_output=True, text=True, env=env)
    check(r.returncode == 0 and r.stdout.startswith("error 5") and "s.rfrec" in r.stdout
          and "offset" in r.stdout, f"a failed read at its batch: {r.stdout} {r.stderr[-300:]}")
    for bad in (dict(batch_size=0), dict(rank=2, world=2), dict(split="val"),
                dict(prefetch=100, hold=29)):
        kw = dict(batch_size=8)
        kw.update(bad)
        try:
            ringflow.Loader(path, **kw)
            check(False, f"refused: {bad}")
        except ValueError:
            check(True, "")
    lx = ringflow.Loader(path, 8)
    res = []


    def other():
        try:
            next(lx)
            res.append("no error")
        except ringflow.Error as e:
            res.append(e)
    th = threading.Thread(target=other)
    th.start()
    th.join()
    check(isinstance(res[0], ringflow.Error) and res[0].errno == errno.EPERM,
          f"another thread is refused: {res[0]}")

    # RecordDataset in a DataLoader
    for workers in (0, 2):
        seen = []
        for rank in (0, 1):
            ds = rtorch.RecordDataset(path, 16, seed=4, rank=rank, world=2,
                                      num_workers=workers)
            ds.set_epoch(1)
            # workers from a fork server: ringflow's threads exist in this process, and
            # a child forked from it that starts threads is what ThreadSanitizer (and
            # POSIX) will not have; the server is a fresh interpreter with no threads,
            # torch imported once there (a spawned worker imports it anew: 1.5 s, 6 s
            # under ThreadSanitizer). The dataset reaches a worker pickled, as it does
            # a spawned one.
            dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=workers,
                                             multiprocessing_context=MP if workers else None)
            got = 0
            for x, y in dl:
                check(x.shape[1:] == SHAPE and x.dtype == torch.float32, "batches of the records' shape")
                seen += ids(x)
                got += 1
            check(len(dl) == got == max(workers, 1) * -(-N // (16 * 2 * max(workers, 1))),
                  f"len(DataLoader(RecordDataset)), {workers} workers: {len(dl)}, {got} yielded")
        check(sorted(seen) == list(range(N)), f"RecordDataset, {workers} workers, 2 ranks: each record once")
    # len(): the batches yielded, empty shards of a short last batch counted (1000
    # records in batches of 3 x 333: the last one's single record is one worker's)
    for drop, want in ((False, 6), (True, 3)):
        ds = rtorch.RecordDataset(path, 333, drop_last=drop, num_workers=3)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=3,
                                         multiprocessing_context=MP)
        rows = [x.shape[0] for x, _ in dl]
        check(len(ds) == len(dl) == len(rows) == want and sum(rows) == (999 if drop else N),
              f"len(RecordDataset(drop_last={drop})) = {len(ds)}: {rows} yielded")
    # len() without num_workers: a TypeError naming it (list() still works: it takes a
    # TypeError from len() as no length); a DataLoader of another worker count: refused
    ds = rtorch.RecordDataset(path, 16)
    try:
        len(ds)
        check(False, "len(RecordDataset()) without num_workers refused")
    except TypeError as e:
        check("num_workers" in str(e), f"len() without num_workers: {e}")
    check(len(list(torch.utils.data.DataLoader(ds, batch_size=None))) == 63,
          "list(DataLoader) of a RecordDataset without num_workers")
    for given, actual in ((2, 0), (0, 2)):
        ds = rtorch.RecordDataset(path, 16, num_workers=given)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=actual,
                                         multiprocessing_context=MP if actual else None)
        try:
            next(iter(dl))
            check(False, f"RecordDataset(num_workers={given}) in a DataLoader of {actual}")
        except ValueError as e:   # a worker's exception comes back re-raised as its type
            check(f"num_workers={given}" in str(e) and f"read by {actual}" in str(e),
                  f"a DataLoader of {actual} workers, num_workers={given} given: {e}")
        del dl
    for bad in (-1, 1.5, "2", True):
        try:
            rtorch.RecordDataset(path, 16, num_workers=bad)
            check(False, f"num_workers={bad!r} refused")
        except (TypeError, ValueError) as e:
            check("num_workers" in str(e), f"num_workers={bad!r}: {e}")
    # persistent workers see each set_epoch (they kept epoch 0's copy: every epoch read
    # in epoch 0's order): each epoch's order is the one a fresh DataLoader gives
    def epoch_orders(persistent):
        ds = rtorch.RecordDataset(path, 16, seed=4)
        dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2,
                                         persistent_workers=persistent,
                                         multiprocessing_context=MP)
        out = []
        for e in range(2):   # (each fresh epoch starts two workers)
            ds.set_epoch(e)
            out.append(sorted(ids(x)[0] for x, _ in dl))  # each batch's first record
        return out
    pers, fresh = epoch_orders(True), epoch_orders(False)
    check(pers == fresh and pers[0] != pers[1],
          f"persistent workers follow set_epoch: {pers[0][:4]}, {pers[1][:4]} vs {fresh[1][:4]}")
    # a RecordDataset pickled outside a worker's start carries the epoch's value
    import pickle
    ds = rtorch.RecordDataset(path, 16)
    ds.set_epoch(7)
    check(pickle.loads(pickle.dumps(ds)).epoch == 7, "a pickled RecordDataset keeps its epoch")
    # a missing file is refused here, not first in a worker
    try:
        rtorch.RecordDataset(os.path.join(os.path.dirname(path), "nonexistent.rfrec"), 16)
        check(False, "RecordDataset of a missing file refused")
    except ringflow.Error as e:
        check(e.errno == errno.ENOENT and "nonexistent.rfrec" in str(e), f"a missing file: {e}")

    # Engine: the seeds' dependency engine from Python
    e = ringflow.Engine(workers=2)
    a, b = e.var("a"), e.var("b")
    log = []
    e.push(lambda: log.append("w1"), mutates=[a])
    e.push(lambda: log.append("w2"), mutates=[a])
    e.push(lambda: log.append("r"), reads=[a], mutates=[b])
    e.wait(b)
    check(log == ["w1", "w2", "r"], f"mutations in push order, a read after them: {log}")
    def boom():
        raise KeyError("the key")
    c = e.var("c")
    e.push(boom, mutates=[c])
    try:
        e.wait(c)
        check(False, "a raising op fails its variable's wait")
    except ringflow.Error as err:
        check("KeyError" in str(err) and "the key" in str(err), f"the exception's text: {err}")
    x = e.var("x")
    for i in range(100):
        e.push(lambda i=i: log.append(i), reads=[a], mutates=[x])
    e.wait(x)
    try:
        e.wait_all()
        check(False, "wait_all reports the op that failed")
    except ringflow.Error as err:
        check("KeyError" in str(err), f"wait_all names the failed op's exception: {err}")
    check(log[-100:] == list(range(100)), "100 ops on one variable in order")

    # the Engine's arguments are never guessed: workers whole (not cut to 32 bits, not
    # a bool, float or string taken for an int), 1..64, named with the value as given
    for w, exc in ((-1, ValueError), (0, ValueError), (65, ValueError), (2**32 + 2, ValueError),
                   (2**40, ValueError), (2**63, ValueError), (2**64, OverflowError),
                   (-2**64, OverflowError), (True, TypeError), (False, TypeError),
                   (2.0, TypeError), ("2", TypeError), (None, TypeError)):
        for make in (lambda: ringflow.Engine(workers=w), lambda: ringflow.Engine(w)):
            try:
                make()
                check(False, f"Engine(workers={w!r}) refused")
            except exc as err:
                check("workers" in str(err) and (exc is TypeError and repr(w) in str(err) or
                                                 f"workers={w}:" in str(err) and "1 to 64" in str(err)),
                      f"Engine(workers={w!r}): {type(err).__name__} naming it and the value: {err}")
    for w in (1, 64, np.int64(3)):
        with ringflow.Engine(workers=w) as e2:
            v2, ran = e2.var("v2"), []
            e2.push(lambda: ran.append(1), mutates=[v2])
            e2.wait(v2)
            check(ran == [1], f"Engine(workers={w!r}) runs an op")
    # threads=: the worker streams share that many threads (stream i on thread
    # i % threads); ops pushed round-robin over the streams find exactly that many
    for w, t in ((4, 1), (4, 2), (3, 3), (2, None)):
        with ringflow.Engine(workers=w, threads=t) as e3:
            idents, vs = set(), [e3.var(f"t{i}") for i in range(4 * w)]
            for v in vs:
                e3.push(lambda: idents.add(threading.get_ident()), mutates=[v])
            e3.wait_all()
            check(len(idents) == (t or w) and threading.get_ident() not in idents,
                  f"Engine(workers={w}, threads={t}): ops ran on {len(idents)} threads")
    for t, exc in ((0, ValueError), (5, ValueError), (-1, ValueError), (True, TypeError),
                   (2.0, TypeError), ("1", TypeError)):
        try:
            ringflow.Engine(workers=4, threads=t)
            check(False, f"Engine(workers=4, threads={t!r}) refused")
        except exc as err:
            check("threads" in str(err) and (exc is TypeError or f"threads={t}:" in str(err)
                                             and "1 to 4" in str(err)),
                  f"Engine(threads={t!r}): {type(err).__name__} naming it and its range: {err}")
    for bad, exc in ((3, TypeError), (None, TypeError), (b"v", TypeError), ("a\0b", ValueError)):
        try:
            e.var(bad)
            check(False, f"var({bad!r}) refused")
        except exc as err:
            check("name" in str(err), f"var({bad!r}): {type(err).__name__} naming it: {err}")
    for kw, exc, name in ((dict(reads=None), TypeError, "reads"), (dict(mutates=5), TypeError, "mutates"),
                          (dict(reads="ab"), TypeError, "reads"), (dict(mutates=[a, 3]), TypeError, "mutates[1]"),
                          (dict(reads=[a] * 65), ValueError, "reads"), (dict(fn=3), TypeError, "fn")):
        kw = dict(dict(fn=lambda: None), **kw)
        try:
            e.push(**kw)
            check(False, f"push({kw}) refused")
        except exc as err:
            check(name in str(err), f"push({kw}): {type(err).__name__} naming {name}: {err}")
    e.push(lambda: log.append("set"), reads={a}, mutates=(v for v in [x]))
    e.wait(x)
    check(log[-1] == "set", "push takes any iterable of Vars but a str")

    # close(): runs what was pushed, then frees the engine; again, nothing; any call
    # after it is ringflow.Error EBADF (as a closed Loader's); a with block closes it
    e3 = ringflow.Engine(workers=2)
    v3, ran = e3.var("v3"), []
    for i in range(50):
        e3.push(lambda i=i: ran.append(i), mutates=[v3])
    e3.close()
    check(ran == list(range(50)), f"close() runs the ops pushed before it: {len(ran)}")
    e3.close()
    check(v3.name == "v3", f"a Var keeps its name after its Engine is closed: {v3.name!r}")
    for what, f in (("var", lambda: e3.var()), ("push", lambda: e3.push(print)),
                    ("wait", lambda: e3.wait(v3)), ("wait_all", e3.wait_all),
                    ("clear_error", v3.clear_error), ("__enter__", e3.__enter__),
                    ("Engine", e3.__init__)):
        try:
            f()
            check(False, f"{what} after close() refused")
        except ringflow.Error as err:
            check(err.errno == errno.EBADF and what in str(err) and "closed" in str(err),
                  f"{what} after close(): EBADF: {err}")
    del v3, e3
    ran = []
    with ringflow.Engine() as e4:
        check(type(e4) is ringflow.Engine, f"with Engine() as e: the Engine: {e4!r}")
        v4 = e4.var()
        e4.push(lambda: ran.append(1), mutates=[v4])
    check(ran == [1], "the end of the with block runs what was pushed")
    try:
        e4.wait_all()
        check(False, "an Engine after its with block is closed")
    except ringflow.Error as err:
        check(err.errno == errno.EBADF, f"after the with block: {err}")
    try:
        with ringflow.Engine() as e5:
            raise KeyError("in the block")
    except KeyError as err:
        check("in the block" in str(err), "a with block's exception goes on")
    try:
        e5.push(print)
        check(False, "closed by a with block that raised")
    except ringflow.Error as err:
        check(err.errno == errno.EBADF, f"closed by the block that raised: {err}")
    with ringflow.Engine() as e6:      # a failed op no one waits for: close() drains it
        v6 = e6.var()
        e6.push(boom, mutates=[v6])
    e7, res = ringflow.Engine(), []
    def close_elsewhere():
        try:
            e7.close()
            res.append("closed")
        except ringflow.Error as err:
            res.append(err.errno)
    th = threading.Thread(target=close_elsewhere)
    th.start()
    th.join()
    check(res == [errno.EPERM], f"close() from another thread is refused: {res}")
    v7, ran = e7.var(), []
    e7.push(lambda: ran.append(1), mutates=[v7])
    e7.wait(v7)
    check(ran == [1], "the Engine goes on after another thread's close() was refused")
    e7.close()

    # Made in one thread, let go in another (the collector, a consumer thread): the
    # ring, engine and worker threads are the owner thread's, so they are not freed
    # from there (that freed memory under live workers: ThreadSanitizer saw it) --
    # leaked with a ResourceWarning -- and a batch it exported keeps its bytes.
    import warnings
    box = {}
    def make_in_thread():
        l = ringflow.Loader(path, 64, shuffle=False)
        box["x"], _ = next(iter(l))
        e2 = ringflow.Engine()
        v = e2.var("v")
        e2.push(lambda: None, mutates=[v])
        e2.wait_all()
        box.update(l=l, e=e2, v=v)
    t = threading.Thread(target=make_in_thread)
    t.start()
    t.join()
    check(set(box) == {"x", "l", "e", "v"}, f"made in a thread: {sorted(box)}")
    first = np.from_dlpack(box["x"]).copy()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        del box["l"], box["v"], box["e"]
        check(np.array_equal(np.from_dlpack(box["x"]), first) and ids(box["x"]) == list(range(64)),
              "a batch keeps its bytes once its Loader's name is gone on another thread")
        box.clear()
    msgs = [str(w.message) for w in got if issubclass(w.category, ResourceWarning)]
    check(len(msgs) == 2 and any("Loader" in m for m in msgs) and any("Engine" in m for m in msgs)
          and all("close()" in m for m in msgs),
          f"a ResourceWarning each for the Loader and the Engine let go elsewhere: {msgs}")
    # A batch released on another thread gives its slot back there (rf_loader_unref is
    # safe on any thread, even while the owner is mid-wait without the GIL).
    l = ringflow.Loader(path, 16, shuffle=False, prefetch=1, hold=1)
    seen, it = [], iter(l)
    for k in range(40):
        x, y = next(it)
        seen.append(ids(x)[0])
        t = threading.Thread(target=lambda b=[x, y]: b.clear())
        del x, y
        t.start()
        t.join()
    check(seen[:4] == [0, 16, 32, 48] and l.held_slots() == 0,
          f"40 batches, each let go on another thread: no slot stays held ({l.held_slots()})")
    l.close()

    # integrity: a flipped payload byte is served unless verify=True, which names the file
    flipped = os.path.join(T, "flipped.rfrec")
    raw = bytearray(open(path, "rb").read())
    raw[len(raw) // 2] ^= 0x40
    open(flipped, "wb").write(bytes(raw))
    with ringflow.Loader(flipped, 64, shuffle=False) as l:
        check(next(l)[0] is not None, "verify=False (the default): the header only")
    for kw in ({"verify": True},):
        try:
            ringflow.Loader(flipped, 64, **kw)
            check(False, "verify=True refuses a flipped byte")
        except ringflow.Error as err:
            check("flipped.rfrec" in str(err) and "CRC" in str(err), f"verify=True: {err}")
    with ringflow.Loader(path, 64, verify=True) as l:
        check(len(l) == (N + 63) // 64, "verify=True accepts an intact file")

    # the tail (an epoch's last, partial batch) kept across epochs: hold= covers it too
    tails = []
    l = ringflow.Loader(path, 64, seed=2, hold=2)          # 1000 = 15 x 64 + 40
    for ep in range(3):
        last = None
        for x, y in l:
            last = x
        check(np.from_dlpack(last).shape[0] == 40, "the tail batch has 40 rows")
        if ep < 2:
            tails.append((last, np.from_dlpack(last).copy()))
        del x, y, last
    check(all(np.array_equal(np.from_dlpack(t), c) for t, c in tails),
          "two epochs' tails kept (hold=2) keep their bytes while a third epoch is read")
    del tails
    l.close()
    # a torch Dataset's batches are keepable: list(DataLoader(...)) of a whole epoch
    kept = list(torch.utils.data.DataLoader(rtorch.RecordDataset(path, 64, seed=4),
                                            batch_size=None))
    got = sorted(i for x, _ in kept for i in ids(x))
    check(got == list(range(N)), f"list(DataLoader(RecordDataset)): every record once, kept ({len(kept)} batches)")
    del kept

    # the default order is uniform: on a file sorted by class a batch holds every class
    sorted_path = os.path.join(T, "sorted.rfrec")
    # (2000-byte records: a window of 8 512-KiB chunks holds ~2,100 of 10,000, two classes)
    ringflow.pack(sorted_path, np.zeros((10000, 2000), np.uint8), np.arange(10000) // 1000)
    def classes_per_batch(**kw):
        got = [len(set(np.from_dlpack(y).tolist()))
               for _, y in ringflow.Loader(sorted_path, 200, seed=1, **kw)]
        return sum(got) / len(got)
    uni, win = classes_per_batch(), classes_per_batch(order="windowed")
    check(uni >= 9.9, f"the default order: {uni:.2f} of 10 classes per batch on a sorted file")
    check(win < uni - 1, f"windowed is told apart: {win:.2f} classes per batch against {uni:.2f}")
    try:
        ringflow.Loader(sorted_path, 200, order="random")
        check(False, "order='random' refused")
    except ValueError as e:
        check("order" in str(e), f"a bad order names it: {e}")

    # a stalled server (accepts, answers the open's requests, then never again): the
    # timeout is an argument; close() and the end of a Loader cancel what is in flight
    # at once; Ctrl-C ends a wait within a fraction of a second
    import signal, time
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from stall_server import StallServer
    srv = StallServer(open(path, "rb").read())
    url = srv.url("r.rfrec")
    l = ringflow.Loader(url, 16, timeout=0.1)
    srv.stall()
    t0 = time.monotonic()
    try:
        next(l)
        check(False, "a stalled server's batch fails")
    except ringflow.Error as e:
        check(e.errno == errno.ETIMEDOUT and url in str(e), f"a stalled server: {e}")
    t1 = time.monotonic()
    l.close()
    # (bounds far above what is measured -- 0.003 s, ~3 s -- and far below a hang: a
    # loaded machine must not fail them; the figures are printed)
    check(time.monotonic() - t1 < 10, f"close() after the timeout error: {time.monotonic() - t1:.2f} s")
    check(t1 - t0 < 30, f"the error within the timeout's retries: {t1 - t0:.2f} s")
    # stalled from the start: timeout= bounds the open's own requests too (they took
    # RF_HTTP_TIMEOUT_MS's 10 s, 40 s with retries); the error names the timeout
    try:
        ringflow.Loader(url, 16, timeout=0.1)
        check(False, "an open against a stalled server fails")
    except ringflow.Error as e:
        check(e.errno == errno.ETIMEDOUT and url in str(e) and "timeout 100 ms" in str(e),
              f"an open against a stalled server names its timeout: {e}")
    # a signal handler that closes the Loader whose next() is waiting (handlers run in
    # its wait): refused with EBUSY, not freed under the wait; closed after
    srv.stall(False)
    l = ringflow.Loader(url, 16, timeout=0.2)
    srv.stall()
    got = []
    def close_in_handler(signum, frame):
        # and next(), set_epoch() (a seek): the same batch twice, or a queue emptied
        # under the waiting next() (a crash) before they were refused
        for call in (l.close, lambda: next(l), lambda: l.set_epoch(3)):
            try:
                call()
                got.append(0)
            except ringflow.Error as e:
                got.append(e.errno)
    old_usr1 = signal.signal(signal.SIGUSR1, close_in_handler)
    threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGUSR1)).start()
    try:
        next(l)
        check(False, "a stalled server's batch fails")
    except ringflow.Error as e:
        check(e.errno == errno.ETIMEDOUT, f"next() after a handler's close(): {e}")
    signal.signal(signal.SIGUSR1, old_usr1)
    check(got == [errno.EBUSY] * 3, f"close(), next(), set_epoch() in a handler during next(): "
          f"{got}")
    l.close()
    srv.stall(False)
    l = ringflow.Loader(url, 16)   # the default timeout: 10 s
    srv.stall()
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    try:
        next(l)
        check(False, "Ctrl-C ends a wait on a stalled server")
    except KeyboardInterrupt:
        check(time.monotonic() - t0 < 10, f"Ctrl-C: KeyboardInterrupt after {time.monotonic() - t0:.2f} s")
    t1 = time.monotonic()
    l.close()
    check(time.monotonic() - t1 < 10, f"close() after Ctrl-C: {time.monotonic() - t1:.2f} s")
    srv.stall(False)
    l = ringflow.Loader(url, 16, prefetch=4)
    srv.stall()
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    try:
        next(l)                    # stalls: reads out; Ctrl-C again
    except KeyboardInterrupt:
        pass
    t1 = time.monotonic()
    del l                          # dropping the Loader cancels them
    check(time.monotonic() - t1 < 10, f"a Loader let go with stalled reads: {time.monotonic() - t1:.2f} s")
    srv.close()
    e = ringflow.Engine()
    v = e.var()
    gate = threading.Event()
    e.push(lambda: gate.wait(10), mutates=[v])
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    t0 = time.monotonic()
    try:
        e.wait(v)
        check(False, "Ctrl-C ends Engine.wait")
    except KeyboardInterrupt:
        check(time.monotonic() - t0 < 10, f"Engine.wait: KeyboardInterrupt after {time.monotonic() - t0:.2f} s")
    gate.set()
    e.wait_all()
    # a poisoned variable: a skip says which, and clear_error() lets ops run again
    p = e.var("p")
    def fails():
        raise ValueError("no")
    e.push(fails, mutates=[p])
    e.push(lambda: None, mutates=[p])
    try:
        e.wait(p)
        check(False, "a poisoned variable's wait raises")
    except ringflow.Error as err:
        check("ValueError" in str(err), f"the wait names the first failure: {err}")
    try:
        e.wait_all()
    except ringflow.Error:
        pass
    q = e.var("q")
    e.push(lambda: None, reads=[p], mutates=[q])
    try:
        e.wait(q)
        check(False, "an op reading a poisoned variable is skipped")
    except ringflow.Error as err:
        check("reads" in str(err) and "clear_error" in str(err), f"skipped (reads): {err}")
    try:
        e.wait_all()
    except ringflow.Error:
        pass
    p.clear_error()
    q.clear_error()
    ran = []
    e.push(lambda: ran.append(1), reads=[p], mutates=[q])
    e.wait(q)
    check(ran == [1], "after clear_error() an op on the variables runs")
    e.wait_all()
    for bad in (0, -1, float("inf"), "1", 4000):
        try:
            ringflow.Loader(path, 16, timeout=bad)
            check(False, f"timeout={bad!r} refused")
        except (TypeError, ValueError) as err:
            check("timeout" in str(err), f"timeout={bad!r}: {err}")

    # a file without labels (pack's default): batches whose labels are None, never a crash
    nolab = os.path.join(T, "nolab.rfrec")
    ringflow.pack(nolab, imgs[:40])
    with ringflow.Loader(nolab, 16, shuffle=False) as l:
        x, y = next(l)
        check(y is None and ids(x) == list(range(16)), "a label-less file: labels None")
        del x
    got = [y for _, y in torch.utils.data.DataLoader(rtorch.RecordDataset(nolab, 16),
                                                     batch_size=None)]
    check(len(got) == 3 and all(y is None for y in got), "RecordDataset of a label-less file")
    # types made by the library only refuse to be made from Python
    for cls in (ringflow.Tensor, ringflow.Var):
        try:
            cls()
            check(False, f"{cls.__name__}() refused")
        except TypeError:
            check(True, "")
    # arguments are never guessed: each a TypeError/ValueError/OverflowError naming it
    def refused(kw, exc, name):
        try:
            ringflow.Loader(path, **kw)
            check(False, f"Loader({kw}) refused")
        except exc as e:
            check(name in str(e), f"Loader({kw}): {type(e).__name__} naming {name}: {e}")
    refused(dict(batch_size=-1), ValueError, "batch_size")
    refused(dict(batch_size=2**32 + 5), ValueError, "batch_size")
    refused(dict(batch_size=True), TypeError, "batch_size")
    refused(dict(batch_size=2.5), TypeError, "batch_size")
    refused(dict(batch_size="64"), TypeError, "batch_size")
    refused(dict(batch_size=64, seed=2**70), OverflowError, "seed")
    refused(dict(batch_size=64, seed=-1), ValueError, "seed")
    refused(dict(batch_size=64, world=-1), ValueError, "world")
    refused(dict(batch_size=64, rank=2, world=2), ValueError, "rank")
    refused(dict(batch_size=64, prefetch=3, hold=2**32 - 1), ValueError, "hold")
    refused(dict(batch_size=64, prefetch=100, hold=100), ValueError, "prefetch")
    refused(dict(batch_size=64, std=0), ValueError, "std")
    refused(dict(batch_size=64, mean=float("nan")), ValueError, "mean")
    refused(dict(batch_size=64, shuffle="yes"), TypeError, "shuffle")
    refused(dict(batch_size=64, shuffle=2), TypeError, "shuffle")     # a flag: 0/1 at most
    refused(dict(batch_size=64, drop_last=None), TypeError, "drop_last")
    refused(dict(batch_size=64, shuffle=0.0), TypeError, "shuffle")
    refused(dict(batch_size=64, split="val"), ValueError, "split")
    check(len(ringflow.Loader(path, np.int64(64))) == (N + 63) // 64, "a numpy integer is an int")
    # the path or URL: what is wrong with it, not a guess at an IDX directory inside it
    for bad, exc, word in ((os.path.join(T, "missing.rfrec"), ringflow.Error, "missing.rfrec"),
                           ("https://127.0.0.1/x.rfrec", ValueError, "http://"),
                           ("ftp://127.0.0.1/x.rfrec", ValueError, "http://")):
        try:
            ringflow.Loader(bad, 16)
            check(False, f"Loader({bad!r}) refused")
        except exc as e:
            check(word in str(e) and "train-images" not in str(e), f"Loader({bad!r}): {e}")
    # load_state_dict: a state must name its order, with fields of the right type
    l = ringflow.Loader(path, 64, seed=5)
    st = l.state_dict()
    check(st["order"] == "uniform", f"the state names its order: {st}")
    for k, v, exc in (("seed", None, ValueError), ("batch", "3", TypeError),
                      ("batch", 10**6, ValueError), ("shuffle", "x", TypeError),
                      ("epoch", -1, ValueError), ("order", None, ValueError),
                      ("order", "windowed", ValueError), ("order", 1, TypeError),
                      ("order", "random", ValueError)):
        bad = dict(st)
        if v is None:
            del bad[k]
        else:
            bad[k] = v
        try:
            l.load_state_dict(bad)
            check(False, f"load_state_dict with {k}={v!r} refused")
        except exc as e:
            check(k in str(e), f"load_state_dict {k}={v!r}: {type(e).__name__}: {e}")
    l.load_state_dict(st)
    l.close()
    # a windowed Loader's state is refused by a uniform one and the other way round (it
    # was taken: records read twice and others never, in a file of several chunks)
    w = ringflow.Loader(path, 64, seed=5, order="windowed")
    next(w)
    ws = w.state_dict()
    check(ws["order"] == "windowed", f"a windowed Loader's state: {ws}")
    for src, dst in ((ws, ringflow.Loader(path, 64, seed=5)), (st, w)):
        try:
            dst.load_state_dict(src)
            check(False, f"a state of order {src['order']!r} refused by the other order")
        except ValueError as e:
            check("order" in str(e), f"another order's state: {e}")
        dst.close()
    # the last epoch, 2^63-1: read to its end it is not followed by 2^63 (a state no
    # load_state_dict takes): its end comes once, then next() says so (EOVERFLOW)
    # until set_epoch/load_state_dict; every state_dict() on the way is loadable
    LAST = 2**63 - 1
    for how in ("set_epoch", "epoch=", "load_state_dict"):
        a = ringflow.Loader(small, 16, seed=9, epoch=LAST if how == "epoch=" else 0)
        if how == "set_epoch":
            a.set_epoch(LAST)
        elif how == "load_state_dict":
            a.load_state_dict(dict(a.state_dict(), epoch=LAST))
        got = []
        for k, (x, _) in enumerate(a):
            got += ids(x)
            st = a.state_dict()
            check(st["epoch"] == LAST and st["batch"] == k + 1, f"{how}: state {st}")
            if how == "set_epoch" and k == 6:
                b = ringflow.Loader(small, 16, seed=9)
                b.load_state_dict(st)
                mid = (list(got), epoch_ids(b))
                b.close()
            del x
        check(sorted(got) == list(range(250)), f"{how}: the last epoch, every record once")
        if how == "set_epoch":
            check(mid[0] + mid[1] == got, "stopped in the last epoch and restored: each record once")
        st = a.state_dict()
        check(st["epoch"] == LAST and st["batch"] == len(a), f"{how}: at the end: {st}")
        for _ in range(2):
            try:
                next(a)
                check(False, f"{how}: no epoch after the last")
            except ringflow.Error as e:
                check(e.errno == errno.EOVERFLOW and str(LAST) in str(e) and "set_epoch" in str(e),
                      f"{how}: past the last epoch: {e}")
        check(a.state_dict() == st and a.epoch == LAST, f"{how}: the state stays {a.state_dict()}")
        b = ringflow.Loader(small, 16, seed=9)
        b.load_state_dict(st)
        check(epoch_ids(b) == [], f"{how}: the end of the last epoch restored: nothing left")
        try:
            next(b)
            check(False, "restored: no epoch after the last")
        except ringflow.Error as e:
            check(e.errno == errno.EOVERFLOW, f"restored, past the last epoch: {e}")
        b.close()
        a.set_epoch(0)
        check(sorted(epoch_ids(a)) == list(range(250)), f"{how}: set_epoch(0) reads on")
        a.close()
    a = ringflow.Loader(small, 16)
    for bad, exc in ((LAST + 1, ValueError), (-1, ValueError), (2**64, OverflowError),
                     (True, TypeError), (1.0, TypeError), ("1", TypeError), (None, TypeError)):
        for f in (a.set_epoch, rtorch.RecordDataset(small, 16).set_epoch,
                  lambda e: ringflow.Loader(small, 16, epoch=e),
                  lambda e: a.load_state_dict(dict(a.state_dict(), epoch=e))):
            try:
                f(bad)
                check(False, f"epoch={bad!r} refused")
            except exc as e:
                check("epoch" in str(e), f"epoch={bad!r}: {type(e).__name__} naming it: {e}")
    ds = rtorch.RecordDataset(small, 16)
    ds.set_epoch(np.int64(LAST))
    check(ds.epoch == LAST and type(ds.epoch) is int, f"RecordDataset.set_epoch: {ds.epoch!r}")
    a.close()
    # used after fork(): said so, in the child; the parent's Loader goes on
    l = ringflow.Loader(path, 64, seed=5)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            next(l)
            msg = b"no error"
        except RuntimeError as e:
            msg = str(e).encode()
        except BaseException as e:       # anything else is a failure the parent reports
            msg = repr(e).encode()
        os.write(w, msg)
        os._exit(0)
    os.close(w)
    msg = os.read(r, 4096).decode()
    os.close(r)
    os.waitpid(pid, 0)
    check("fork" in msg and "process" in msg, f"a Loader used after fork(): {msg}")
    check(len(ids(next(l)[0])) == 64, "the parent's Loader still reads after the fork")
    l.close()
    print(f"ringflow python: {checks} checks passed")


if __name__ == "__main__":
    import multiprocessing
    multiprocessing.set_forkserver_preload(["torch", "ringflow.torch"])
    main()
