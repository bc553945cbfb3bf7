"""ringflow from Python: the loader and the dependency engine of libringflow.

    import ringflow, torch
    loader = ringflow.Loader("/usr/share/datasets/fashion-mnist", batch_size=256, seed=0)
    for images, labels in loader:              # one epoch; the next loop, the next epoch
        x = torch.from_dlpack(images)          # zero-copy (DLPack), float32 (n, 28, 28)
        y = torch.from_dlpack(labels).long()   # int32 (n,)

Batches come in the order rf-train reads them for the same seed, epoch and rank. A
batch's memory is the loader's and is not reused while Python (or a tensor made from
it) still holds it. state_dict()/load_state_dict() resume mid-epoch exactly once.
Errors are ringflow.Error (an OSError carrying the C message: file, offset, URL).
"""
import os

from ._ringflow import Engine, Error, Tensor, Var, _Loader, _pack

__all__ = ["Loader", "Engine", "Var", "Tensor", "Error", "pack"]

_STATE_KEYS = ("seed", "batch_size", "world", "rank", "records", "shuffle", "drop_last")


class Loader:
    """Batches of (images, labels) from a .rfrec file (path or http:// URL) or a
    directory of Fashion-MNIST IDX files (split "train" or "test").

    path_or_url  a .rfrec file, an http://HOST[:PORT]/PATH.rfrec, or an IDX directory
    batch_size   records per batch of the whole job (every rank's rows together)
    shuffle      a new order every epoch, a function of (seed, epoch) only
    rank, world  this process's shard of every batch (as rf-train's ranks)
    prefetch     batches read ahead while Python computes
    hold         batch slots Python may keep referenced beyond those (zero-copy views
                 stay valid: the loader never writes a slot Python holds)
    device       "cpu", or "cuda" / "cuda:N" (batches decoded on the GPU)
    mean, std    x = (u8 / 255 - mean) / std
    """

    def __init__(self, path_or_url, batch_size, shuffle=True, seed=0, epoch=0, rank=0,
                 world=1, prefetch=3, drop_last=False, device="cpu", hold=1, split="train",
                 mean=0.0, std=1.0):
        if device == "cuda":
            device = "cuda:0"
        self._l = _Loader(os.fspath(path_or_url), int(batch_size), bool(shuffle), int(seed),
                          int(epoch), int(rank), int(world), int(prefetch), bool(drop_last),
                          str(device), int(hold), str(split), float(mean), float(std))

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
        """Read epoch `epoch` from its first batch next."""
        self._l.seek(int(epoch), 0)

    def state_dict(self):
        """Where the next batch handed out is: {'epoch', 'batch', and the settings that
        fix the order}. Batches read ahead but not handed out are not counted: restored
        (load_state_dict, in this or a new process), the loader gives each record of the
        epoch exactly once across the two runs."""
        return dict(self._l.state())

    def load_state_dict(self, state):
        mine = self._l.state()
        for k in _STATE_KEYS:
            if k in state and state[k] != mine[k]:
                raise ValueError(f"load_state_dict: {k} {state[k]!r} in the state, {mine[k]!r} "
                                 f"in this Loader: the order would differ")
        for k in ("epoch", "batch"):
            if k not in state:
                raise ValueError(f"load_state_dict: the state has no '{k}'")
        self._l.seek(int(state["epoch"]), int(state["batch"]))

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
        except Error:
            pass
        return False


def pack(path, images, labels=None, num_classes=0):
    """Write a .rfrec file as rf-pack does: images a uint8 array (N, ...) -- each record
    its trailing dims -- and labels (N,) integers or None. num_classes > 0: labels must
    lie in [0, num_classes)."""
    import numpy as np
    imgs = np.ascontiguousarray(images)
    if imgs.dtype != np.uint8 or imgs.ndim < 2:
        raise ValueError(f"pack: images of dtype {imgs.dtype} and {imgs.ndim} dims: expected "
                         f"uint8 (N, ...) with at least one record dim")
    labs = None
    if labels is not None:
        l = np.asarray(labels)
        if l.shape != (imgs.shape[0],) or not np.issubdtype(l.dtype, np.integer):
            raise ValueError(f"pack: labels of shape {l.shape} and dtype {l.dtype}: expected "
                             f"({imgs.shape[0]},) integers")
        if l.size and (l.min() < -2**31 or l.max() >= 2**31):
            raise ValueError("pack: labels outside int32")
        labs = np.ascontiguousarray(l, dtype=np.int32)
    _pack(os.fspath(path), imgs, imgs.shape[0], tuple(int(d) for d in imgs.shape[1:]), labs,
          int(num_classes))
