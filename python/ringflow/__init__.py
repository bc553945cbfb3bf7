"""ringflow from Python: the loader and the dependency engine of libringflow.

    import ringflow, torch
    loader = ringflow.Loader("/usr/share/datasets/fashion-mnist", batch_size=256, seed=0)
    for images, labels in loader:              # one epoch; the next loop, the next epoch
        x = torch.from_dlpack(images)          # zero-copy (DLPack), float32 (n, 28, 28)
        y = torch.from_dlpack(labels).long()   # int32 (n,)

Batches come in the order rf-train reads them for the same seed, epoch and rank. A
batch's memory is the loader's and is not reused while Python (or a tensor made from
it) still holds it. state_dict()/load_state_dict() resume mid-epoch exactly once.
Errors are ringflow.Error (an OSError carrying the C message: file, offset, URL); the
library's warnings (an image skipped, a shard's samples passed over) are ringflow.Warning
(a RuntimeWarning), given to Python's warnings module when the call returns.
Arguments are never guessed: a value of the wrong type is a TypeError, one out of range
a ValueError (an integer past 64 bits an OverflowError), each naming the parameter.
A file without labels (pack's default) gives batches whose labels are None.
"""
import errno
import math
import numbers
import os

from ._ringflow import Engine, Error, Tensor, Var, Warning, _Loader, _pack, _MAX_EPOCH, \
    _MAX_RECORD_DIMS

__all__ = ["Loader", "Engine", "Var", "Tensor", "Error", "pack"]  # and Warning: not
# exported by *, where it would hide the builtin

_STATE_KEYS = ("seed", "batch_size", "world", "rank", "records", "shuffle", "drop_last")
_U64 = 2**64 - 1
_ORDERS = ("uniform", "windowed")   # RF_LOADER_ORDER_UNIFORM, _WINDOWED
_MAX_SLOTS = 128        # prefetch + hold: the batch slots one Loader keeps
_MAX_CLASSES = 2**31 - 1   # a .rfrec's i32 labels lie in [0, num_classes)


def _int(name, v, lo, hi):
    """v as an int in [lo, hi]; never a bool, float or string taken for one."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__} {v!r}")
    v = int(v)
    if v < lo or v > hi:
        err = OverflowError if v < -2**63 or v > _U64 else ValueError
        raise err(f"{name}={v}: expected an int from {lo} to {hi}")
    return v


def _flag(name, v):
    if isinstance(v, bool) or (isinstance(v, numbers.Integral) and int(v) in (0, 1)):
        return bool(v)
    raise TypeError(f"{name}: expected True or False, got {type(v).__name__} {v!r}")


def _real(name, v, positive=False):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name}: expected a number, got {type(v).__name__} {v!r}")
    v = float(v)
    if not math.isfinite(v) or (positive and v <= 0):
        raise ValueError(f"{name}={v}: expected a finite number{' > 0' if positive else ''}")
    return v


def _norm(mean, std):
    """mean and std: numbers, or sequences of one per channel (1 to 4, a number beside a
    sequence meaning that number for every channel). Returns (mean, std) as floats or
    as tuples of floats of one length."""
    seq = [isinstance(v, (list, tuple)) for v in (mean, std)]
    if not any(seq):
        return _real("mean", mean), _real("std", std, positive=True)
    n = len(mean) if seq[0] else len(std)
    if seq[0] and seq[1] and len(mean) != len(std):
        raise ValueError(f"mean has {len(mean)} values and std {len(std)}: expected one "
                         f"per channel in both")
    if not 1 <= n <= 4:
        raise ValueError(f"mean/std: {n} values: expected one per channel, 1 to 4")
    m = tuple(_real(f"mean[{i}]", v) for i, v in enumerate(mean)) if seq[0] else \
        (_real("mean", mean),) * n
    s = tuple(_real(f"std[{i}]", v, positive=True) for i, v in enumerate(std)) if seq[1] \
        else (_real("std", std, positive=True),) * n
    return m, s


def _str(name, v, choices=None):
    if not isinstance(v, str):
        raise TypeError(f"{name}: expected a str, got {type(v).__name__} {v!r}")
    if choices and v not in choices:
        raise ValueError(f"{name}={v!r}: expected one of {', '.join(map(repr, choices))}")
    return v


def _source(path_or_url):
    """The path or URL the C loader opens, refused by name where it cannot be one."""
    if isinstance(path_or_url, bytes) or not isinstance(path_or_url, (str, os.PathLike)):
        raise TypeError(f"path_or_url: expected a str or path, got "
                        f"{type(path_or_url).__name__} {path_or_url!r}")
    p = os.fspath(path_or_url)
    if "://" in p:
        if not p.startswith("http://"):
            raise ValueError(f"path_or_url={p!r}: only plain http:// URLs are read (no TLS, "
                             f"no other scheme)")
        return p
    if not os.path.exists(p) and not (p.lower().endswith(".tar") and "{" in p):
        # (a brace pattern of WebDataset shards, DIR/train-{000..009}.tar, is expanded
        # and each shard checked by the library)
        raise Error(errno.ENOENT, "no such .rfrec file or Fashion-MNIST directory", p)
    return p


def _loader_args(batch_size, shuffle, seed, epoch, rank, world, prefetch, drop_last, hold,
                 split, mean, std):
    """The Loader's arguments checked (and RecordDataset's, before any worker starts)."""
    batch_size = _int("batch_size", batch_size, 1, 2**31 - 1)
    world = _int("world", world, 1, 65536)
    rank = _int("rank", rank, 0, world - 1)
    prefetch = _int("prefetch", prefetch, 1, _MAX_SLOTS)
    hold = _int("hold", hold, 0, _MAX_SLOTS)
    if prefetch + hold > _MAX_SLOTS:
        raise ValueError(f"prefetch={prefetch}, hold={hold}: expected prefetch + hold <= "
                         f"{_MAX_SLOTS} (the batch slots a Loader keeps)")
    mean, std = _norm(mean, std)
    return dict(batch_size=batch_size, shuffle=_flag("shuffle", shuffle),
                seed=_int("seed", seed, 0, _U64), epoch=_int("epoch", epoch, 0, _MAX_EPOCH),
                rank=rank, world=world, prefetch=prefetch, drop_last=_flag("drop_last", drop_last),
                hold=hold, split=_str("split", split, ("train", "test")),
                mean=mean, std=std)


def _norm_kw(mean, std):
    """The extension's normalisation arguments: a scalar mean and std, or per-channel
    values (channel_mean, channel_std) with the scalars left at (0, 1)."""
    if isinstance(mean, tuple):
        return dict(mean=0.0, std=1.0, scale=0.0, channel_mean=mean, channel_std=std)
    return dict(mean=mean, std=std, scale=0.0)


class Loader:
    """Batches of (images, labels) from a .rfrec file (path or http:// URL) or a
    directory of Fashion-MNIST IDX files (split "train" or "test").

    path_or_url  a .rfrec file, an http://HOST[:PORT]/PATH.rfrec, a WebDataset shard
                 (PATH.tar: KEY.jpg|.png + KEY.cls, read where they lie; needs
                 image_size), or an IDX directory
    batch_size   records per batch of the whole job (every rank's rows together)
    shuffle      a new order every epoch, a function of (seed, epoch) only
    rank, world  this process's shard of every batch (as rf-train's ranks)
    prefetch     batches read ahead while Python computes
    order        "uniform" (every order equally likely; small records on disk read one
                 by one) or "windowed" (chunks read whole and shuffled in windows: fewer,
                 sequential reads, but a batch draws from a few windows -- on a file
                 sorted by class, from a few classes)
    hold         batch slots Python may keep referenced beyond those (zero-copy views
                 stay valid: the loader never writes a slot Python holds)
    device       "cpu", or "cuda" / "cuda:N" (batches decoded on the GPU)
    mean, std    x = (u8 / 255 - mean) / std: numbers, or one per channel of the
                 samples (an image's 3: torchvision's Normalize, e.g. ImageNet's
                 (0.485, 0.456, 0.406) and (0.229, 0.224, 0.225))
    verify       read a .rfrec whole first and check its data CRC and labels (a flipped
                 byte is an error naming the file); default False: the header, its CRC
                 and the sizes are checked, the records as they are read are not
    image_size   a .rfrec of JPEG/PNG images (rf-pack --image-folder): the size S of the
                 (3, S, S) samples they are decoded to (required for such a file)
    augment      images: RandomResizedCrop(S) and a random horizontal flip (torchvision's,
                 a function of (seed, epoch, record)); False: resize the shorter side to
                 S * 256/224 and take the centre crop (evaluation)
    workers      images: threads decoding batches side by side (0: one per CPU)
    dtype        "float32" (default: x = (u8 / 255 - mean) / std) or "uint8" (the
                 records' bytes as they are: an image's (3, S, S) sample, no decode)
    layout       "nchw" (default) or "nhwc": x of shape (n, H, W, C), each pixel's
                 channels side by side (what DALI and FFCV hand a GPU, and what
                 channels_last models read); with dtype="uint8" on the CPU, the gather
                 writes it so, with no extra pass
    skip_bad_images  an image that fails to decode takes the row and label of the
                 nearest good one of its batch, with a warning naming the file and
                 record, instead of failing the batch (stats()["images_skipped"])
    timeout      an http:// source: seconds per connect, send, receive and response
                 head (None: RF_HTTP_TIMEOUT_MS, else 10). close() -- and the end of the
                 Loader -- cancels what is in flight at once, and Ctrl-C ends a wait
                 within ~0.1 s (KeyboardInterrupt; the batch stays queued)
    """

    def __init__(self, path_or_url, batch_size, shuffle=True, seed=0, epoch=0, rank=0,
                 world=1, prefetch=3, drop_last=False, device="cpu", hold=1, split="train",
                 mean=0.0, std=1.0, order="uniform", timeout=None, verify=False,
                 image_size=None, augment=True, workers=0, dtype="float32", layout="nchw",
                 skip_bad_images=False):
        a = _loader_args(batch_size, shuffle, seed, epoch, rank, world, prefetch, drop_last,
                         hold, split, mean, std)
        device = _str("device", device)
        if device == "cuda":
            device = "cuda:0"
        tmo = 0
        if timeout is not None:
            t = _real("timeout", timeout, positive=True)
            if t > 3600:
                raise ValueError(f"timeout={t}: expected at most 3600 seconds")
            tmo = max(1, math.ceil(t * 1000))
        self._order = _str("order", order, _ORDERS)
        self._l = _Loader(
            _source(path_or_url), a["batch_size"], shuffle=a["shuffle"], seed=a["seed"],
            epoch=a["epoch"], rank=a["rank"], world=a["world"], prefetch=a["prefetch"],
            drop_last=a["drop_last"], device=device, hold=a["hold"], split=a["split"],
            **_norm_kw(a["mean"], a["std"]),
            order=_ORDERS.index(self._order), timeout_ms=tmo,
            verify=_flag("verify", verify),
            image_size=0 if image_size is None else _int("image_size", image_size, 1, 4096),
            augment=_flag("augment", augment), workers=_int("workers", workers, 0, 16),
            u8=_str("dtype", dtype, ("float32", "uint8")) == "uint8",
            nhwc=_str("layout", layout, ("nchw", "nhwc")) == "nhwc",
            skip_bad_images=_flag("skip_bad_images", skip_bad_images))

    def __iter__(self):
        return self

    def __next__(self):
        b = self._l.next()
        if b is None:
            raise StopIteration
        return b

    def __len__(self):
        """Batches per epoch."""
        return self._l.batches()

    @property
    def epoch(self):
        return self._l.state()["epoch"]

    def set_epoch(self, epoch):
        """Read epoch `epoch` (0 to 2**63 - 1) from its first batch next."""
        self._l.seek(epoch=_int("epoch", epoch, 0, _MAX_EPOCH), batch=0)

    def stats(self):
        """Counters since the Loader was made: batches, records, reads, read_bytes,
        read_errors, images_skipped (skip_bad_images) and direct (1: O_DIRECT reads);
        and how it reads: mode (0 in memory, 1 small records in chunks, 2 records one
        by one), chunk_records and window_chunks (mode 1: the windowed order's
        geometry)."""
        return dict(self._l.stats())

    def _plan(self):
        """The order this Loader reads in, which may not be the one asked for (a windowed
        order is read uniformly from memory, images and large records), and its
        geometry: what a state must match."""
        s = self._l.stats()
        if not self._l.state()["shuffle"]:
            return {"order": self._order}   # the file's order, read any way
        if s["mode"] == 1 and self._order == "windowed":
            return {"order": "windowed", "chunk_records": s["chunk_records"],
                    "window_chunks": s["window_chunks"]}
        return {"order": "uniform"}

    def state_dict(self):
        """Where the next batch handed out is: {'epoch', 'batch', and the settings that
        fix the order: the order read in (which may differ from the one asked for: see
        order=) and, windowed, its chunk_records and window_chunks}. Batches read ahead
        but not handed out are not counted, nor is one whose next() failed (the next
        next() reads it again; to pass over it, add 1 to 'batch' and load_state_dict):
        restored (load_state_dict, in this or a new process), the
        loader gives each record of the epoch exactly once across the two runs."""
        st = dict(self._l.state())
        st.update(self._plan())     # uniform and windowed read an epoch differently
        return st

    def load_state_dict(self, state):
        """Resume where state (state_dict()'s) says. It must name the order it was taken
        in -- every key state_dict() writes -- and that order must be this Loader's."""
        if not isinstance(state, dict):
            raise TypeError(f"load_state_dict: expected a dict (state_dict()'s), got "
                            f"{type(state).__name__}")
        mine = self._l.state()
        missing = [k for k in ("epoch", "batch", "order") + _STATE_KEYS if k not in state]
        if missing:
            raise ValueError(f"load_state_dict: the state has no {', '.join(map(repr, missing))}: "
                             f"it does not say which order it was taken in" +
                             (" (a state saved before 'order' was kept: add the order it was "
                              "read in, state['order'] = 'uniform' or 'windowed')"
                              if missing == ["order"] else ""))
        for k in _STATE_KEYS:
            v = state[k]
            v = _flag(f"state['{k}']", v) if k in ("shuffle", "drop_last") else \
                _int(f"state['{k}']", v, 0, _U64)
            if v != mine[k]:
                raise ValueError(f"load_state_dict: {k} {state[k]!r} in the state, {mine[k]!r} "
                                 f"in this Loader: the order would differ")
        o = _str("state['order']", state["order"], _ORDERS)
        plan = self._plan()
        if not mine["shuffle"]:
            return self._seek_to(state)     # the file's order, however it is read
        if o != plan["order"]:
            raise ValueError(f"load_state_dict: order {o!r} in the state, {plan['order']!r} "
                             f"read by this Loader (asked {self._order!r}): the order would "
                             f"differ")
        for k in ("chunk_records", "window_chunks") if "chunk_records" in plan else ():
            if k not in state:
                raise ValueError(f"load_state_dict: a windowed state without {k!r} (saved "
                                 f"before the geometry was kept): it cannot say whether this "
                                 f"Loader's windows are its own")
            v = _int(f"state['{k}']", state[k], 0, _U64)
            if v != plan[k]:
                raise ValueError(f"load_state_dict: {k} {v} in the state, {plan[k]} in this "
                                 f"Loader (another record size or chunk_bytes): the order "
                                 f"would differ")
        return self._seek_to(state)

    def _seek_to(self, state):
        epoch = _int("state['epoch']", state["epoch"], 0, _MAX_EPOCH)
        batch = _int("state['batch']", state["batch"], 0, self._l.batches())
        self._l.seek(epoch=epoch, batch=batch)

    def held_slots(self):
        """Batch slots Python holds now (for tests and tuning hold=)."""
        return self._l.held_slots()

    def close(self):
        """Free the loader now (refused while batches are still referenced)."""
        self._l.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.close()
        except Error as e:
            # batches still referenced: their memory is the loader's, so it stays open --
            # said, not silent (it is freed with the last of them and this Loader)
            if e.errno == errno.EBUSY and "still referenced" in str(e):
                import warnings
                warnings.warn(f"ringflow.Loader: not closed at the end of `with`: "
                              f"{self._l.held_slots()} batch slot(s) still referenced from "
                              f"Python hold the loader's memory; drop them and call close() "
                              f"(or let the Loader go) to free it", ResourceWarning,
                              stacklevel=2)
        return False


def pack(path, images, labels=None, num_classes=0):
    """Write a .rfrec file as rf-pack does: images a uint8 array (N, ...) -- N >= 1
    records, each its trailing 1 to 4 dims -- and labels (N,) integers or None.
    num_classes (0 to 2**31 - 1) > 0: labels must lie in [0, num_classes); without
    labels it must be 0."""
    import numpy as np
    if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"pack: path: expected a str or path, got {type(path).__name__} "
                        f"{path!r}")
    num_classes = _int("num_classes", num_classes, 0, _MAX_CLASSES)
    imgs = np.asarray(images)    # (ascontiguousarray would make a 0-d array 1-d)
    if imgs.dtype != np.uint8 or imgs.ndim < 2:
        raise ValueError(f"pack: images of dtype {imgs.dtype} and shape {imgs.shape}: "
                         f"expected uint8 (N, ...) with at least one record dim")
    imgs = np.ascontiguousarray(imgs)
    rec = imgs.shape[1:]
    if len(rec) > _MAX_RECORD_DIMS:
        raise ValueError(f"pack: images of shape {imgs.shape}: records of {len(rec)} dims "
                         f"{rec}, expected at most {_MAX_RECORD_DIMS} record dims (reshape "
                         f"them)")
    if imgs.shape[0] < 1 or not all(1 <= d <= 2**32 - 1 for d in rec):
        raise ValueError(f"pack: images of shape {imgs.shape}: expected at least 1 record "
                         f"and record dims from 1 to {2**32 - 1}")
    if labels is None and num_classes:
        raise ValueError(f"pack: num_classes={num_classes} without labels: a file without "
                         f"labels has no classes (expected 0, or labels)")
    labs = None
    if labels is not None:
        l = np.asarray(labels)
        if l.shape != (imgs.shape[0],) or not np.issubdtype(l.dtype, np.integer):
            raise ValueError(f"pack: labels of shape {l.shape} and dtype {l.dtype}: expected "
                             f"({imgs.shape[0]},) integers")
        if l.size and (l.min() < -2**31 or l.max() >= 2**31):
            raise ValueError("pack: labels outside int32")
        labs = np.ascontiguousarray(l, dtype=np.int32)
    _pack(path=os.fspath(path), images=imgs, n=imgs.shape[0],
          shape=tuple(int(d) for d in rec), labels=labs, num_classes=num_classes)
