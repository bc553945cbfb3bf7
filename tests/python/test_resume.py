"""test_resume: what a Loader's state_dict() must hold for exactly-once resume.

- The order read in, not the one asked for: the same 2,000 IDX records gzipped are read
  from memory (uniformly, whatever order= says) and uncompressed from disk in windows. A
  windowed state of the first was taken by a Loader over the second (same seed, batch,
  records, order asked): 396 records read twice and 396 never. Now refused, naming the
  order; and a windowed state names its windows (chunk_records, window_chunks), refused
  by a Loader whose records make other windows. Without shuffle (the file's order however
  it is read) a state round-trips whatever the order.
- A batch whose next() failed was counted as handed out: the next next(), and a Loader
  resumed from state_dict(), began after it, and its good records were never read. With
  reads failing now and then (RF_FAULT_INJECT), an epoch read by retrying every failed
  next() gives each record exactly once, and so does one resumed from the state taken
  right after a failure.
Run with Debian's python3 and the package of the build (PYTHONPATH)."""
import gzip
import os
import struct
import sys
import tempfile

import numpy as np

import ringflow

failed = 0


def check(ok, what):
    global failed
    if not ok:
        failed += 1
        print("FAIL:", what)


def ids(x):
    a = np.from_dlpack(x).reshape(x.shape[0], -1).astype(np.int64)
    return list(a[:, 0] + 256 * a[:, 1])


def idx_dir(root, name, n, gz):
    d = os.path.join(root, name)
    os.makedirs(d)
    img = np.zeros((n, 28, 28), np.uint8)
    img[:, 0, 0] = np.arange(n) & 255
    img[:, 0, 1] = np.arange(n) >> 8
    op = gzip.open if gz else open
    ext = ".gz" if gz else ""
    with op(os.path.join(d, "train-images-idx3-ubyte" + ext), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + img.tobytes())
    with op(os.path.join(d, "train-labels-idx1-ubyte" + ext), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + (np.arange(n) % 10).astype(np.uint8).tobytes())
    return d


def read(loader, k=None):
    out = []
    for i, (x, _) in enumerate(loader):
        out += ids(x)
        if k is not None and i + 1 == k:
            break
    return out


def taken(d, kw, k):
    """The first k batches' records of a Loader over d, and its state after them."""
    a = ringflow.Loader(d, **kw)
    first = read(a, k)
    st = a.state_dict()
    a.close()
    return first, st


def resumed(d, kw, st):
    """The rest of the epoch, read by a new Loader over d from st."""
    b = ringflow.Loader(d, **kw)
    b.load_state_dict(st)
    rest = read(b)
    b.close()
    return rest


def refused(d, kw, st, words, what):
    """A Loader over d refuses st with a ValueError naming each of words."""
    b = ringflow.Loader(d, **kw)
    try:
        b.load_state_dict(st)
        check(False, f"refused: {what}")
    except ValueError as e:
        check(all(w in str(e) for w in words), f"refused ({what}), naming {words}: {e}")
    b.close()


def geometry(tmp):
    n = 2000
    gz, raw = idx_dir(tmp, "gz", n, True), idx_dir(tmp, "raw", n, False)
    kw = dict(batch_size=100, seed=1, order="windowed", dtype="uint8")
    _, st = taken(gz, kw, 7)
    check(st["order"] == "uniform" and "chunk_records" not in st,
          f"a gzipped IDX read from memory: its state says uniform: {st}")
    refused(raw, kw, st, ("order", "windowed"),
            "the memory-read state by a Loader reading windows")
    # the same form: taken, exactly once across the two
    for d in (gz, raw):
        first, st = taken(d, kw, 7)
        rest = resumed(d, kw, st)
        check(sorted(first + rest) == list(range(n)), f"{os.path.basename(d)}: exactly once")
    check(st["order"] == "windowed" and st["chunk_records"] > 0 and st["window_chunks"] > 0,
          f"a windowed state names its windows: {st}")
    # without shuffle the order is the file's, read any way: a windowed Loader's state
    # round-trips, and a shuffled state is refused for its shuffle
    nkw = dict(kw, shuffle=False)
    first, nst = taken(raw, nkw, 3)
    for d in (raw, gz):
        check(first + resumed(d, nkw, nst) == list(range(n)),
              f"shuffle=False from {os.path.basename(d)}: the file's order")
    refused(raw, nkw, st, ("shuffle",), "a shuffled state by a Loader without shuffle")
    # other windows (a smaller chunk: the same records, another order) are refused
    for k in ("chunk_records", "window_chunks"):
        bad = dict(st)
        bad[k] += 1
        b = ringflow.Loader(raw, **kw)
        try:
            b.load_state_dict(bad)
            check(False, f"another {k} refused")
        except ValueError as e:
            check(k in str(e), f"another {k}: {e}")
        old = dict(st)
        del old[k]
        try:
            b.load_state_dict(old)
            check(False, f"a windowed state without {k} refused")
        except ValueError as e:
            check(k in str(e), f"without {k}: {e}")
        b.close()


def failing_reads(tmp):
    n = 3000
    a = np.zeros((n, 64), np.uint8)
    a[:, 0] = np.arange(n) & 255
    a[:, 1] = np.arange(n) >> 8
    path = os.path.join(tmp, "r.rfrec")
    ringflow.pack(path, a, labels=np.zeros(n, np.int32))
    os.environ["RF_FAULT_INJECT"] = "eio=0.02,seed=11"   # read when the Loader's ring is made
    try:
        l = ringflow.Loader(path, 50, seed=3, dtype="uint8")
        r = ringflow.Loader(path, 50, seed=3, dtype="uint8")
    finally:
        del os.environ["RF_FAULT_INJECT"]
    got, errors, resumed = [], 0, None
    while True:
        at = l.state_dict()["batch"]
        try:
            x, y = next(l)
        except StopIteration:
            break
        except ringflow.Error as e:
            errors += 1
            check(e.errno == 5, f"an injected read error: {e}")
            st = l.state_dict()
            check(st["batch"] == at, f"a failed next() is not counted: {at} -> {st['batch']}")
            if resumed is None:      # the rest of the epoch from here, in another Loader
                clean = ringflow.Loader(path, 50, seed=3, dtype="uint8")
                clean.load_state_dict(st)
                resumed = got + read(clean)
                clean.close()
            if errors > 200:
                break
            continue
        got += ids(x)
        del x, y
    check(errors > 0, "some reads failed (injected)")
    check(sorted(got) == list(range(n)), f"retrying each failed next(): every record once "
          f"({len(got)} read, {len(set(got))} distinct, {errors} errors)")
    check(resumed is not None and sorted(resumed) == list(range(n)),
          "resumed from the state after a failure: every record once")
    l.close()
    r.close()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        geometry(tmp)
        failing_reads(tmp)
    if failed:
        sys.exit(1)
    print("resume: the order read in and failed batches: ok")


if __name__ == "__main__":
    main()
