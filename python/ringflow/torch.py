"""ringflow for people who keep their torch DataLoader: RecordDataset."""
import multiprocessing
import multiprocessing.context

import torch
import torch.utils.data

from . import Loader


class RecordDataset(torch.utils.data.IterableDataset):
    """A torch IterableDataset of (images, labels) batches read by ringflow's loader.

    Use it with torch.utils.data.DataLoader(ds, batch_size=None, num_workers=W): each
    worker of each rank reads its own shard of every batch -- shard rank * W + worker of
    world * W -- so that every record comes once per epoch across all of them, in the
    order rf-train reads for the same seed. batch_size is the rows of one yielded batch
    (one worker's); set_epoch(e) before each epoch, as with DistributedSampler.
    Batches are tensors of their own (copy=True, the default): keep them as long as you
    like, as with any torch Dataset -- list(DataLoader(ds, batch_size=None)) included.
    copy=False in the main process (num_workers=0) yields zero-copy views of the
    loader's memory instead, valid while held within the Loader's hold= slots; a
    worker process always sends copies (torch moves them to shared memory).
    The epoch lives in shared memory made here: set_epoch reaches the workers of a
    DataLoader with persistent_workers=True too (each reads it when its epoch starts),
    not only workers started after it.
    len() -- and so len(DataLoader(ds, batch_size=None, ...)), what a progress bar or an
    LR schedule asks -- is the batches one epoch yields on this rank, num_workers times
    the batches of the shards' loader (a worker yields every batch's shard, an empty one
    where a short last batch has no rows for it). It depends on the DataLoader's
    num_workers, which a dataset is not told: give the same num_workers= here (None,
    the default: len() raises TypeError saying so). A DataLoader whose worker count
    differs from the one given is refused when its workers start (the count would lie).
    """

    def __init__(self, path_or_url, batch_size, shuffle=True, seed=0, rank=0, world=1,
                 prefetch=3, drop_last=False, split="train", mean=0.0, std=1.0, order="uniform",
                 copy=True, verify=False, num_workers=None):
        super().__init__()
        from . import _ORDERS, _int, _loader_args, _source, _str
        # checked here, in the main process, not first in a worker
        _source(path_or_url)
        rows = _int("batch_size", batch_size, 1, 2**31 - 1)
        _loader_args(rows * _int("world", world, 1, 65536), shuffle, seed, 0, rank, world,
                     prefetch, drop_last, 1, split, mean, std)
        _str("order", order, _ORDERS)
        self.path, self.batch_size, self.shuffle, self.seed = path_or_url, batch_size, shuffle, seed
        self.rank, self.world, self.prefetch, self.drop_last = rank, world, prefetch, drop_last
        self.split, self.mean, self.std, self.order = split, mean, std, order
        from . import _flag
        self.copy = _flag("copy", copy)
        self.verify = _flag("verify", verify)
        self.num_workers = None if num_workers is None else \
            _int("num_workers", num_workers, 0, 4096)
        self._len = {}   # num_workers -> len(), the loader asked once
        # shared with the workers (fork or spawn: handed over as they start), so that a
        # persistent worker sees each set_epoch (it kept epoch 0's copy: every epoch
        # read in epoch 0's order)
        self._epoch = multiprocessing.RawValue("Q", 0)

    @property
    def epoch(self):
        e = self._epoch
        return e if isinstance(e, int) else e.value

    def set_epoch(self, epoch):
        from . import _MAX_EPOCH, _int
        e = _int("epoch", epoch, 0, _MAX_EPOCH)
        if isinstance(self._epoch, int):
            self._epoch = e
        else:
            self._epoch.value = e

    def __getstate__(self):
        st = self.__dict__.copy()
        if multiprocessing.context.get_spawning_popen() is None:
            st["_epoch"] = self.epoch   # an ordinary pickle: the value, not the cell
        return st

    def _loader(self, w, nw, prefetch):
        shards = self.world * nw
        return Loader(self.path, self.batch_size * shards, shuffle=self.shuffle,
                      seed=self.seed, epoch=self.epoch, rank=self.rank * nw + w,
                      world=shards, prefetch=prefetch, drop_last=self.drop_last,
                      split=self.split, mean=self.mean, std=self.std, order=self.order,
                      verify=self.verify)

    def __len__(self):
        if self.num_workers is None:
            raise TypeError("RecordDataset: len() needs num_workers= (the DataLoader's): "
                            "each worker yields its own shard of every batch, so an epoch "
                            "is num_workers times the batches")
        nw = max(self.num_workers, 1)
        if nw not in self._len:   # the count is the same in every epoch
            loader = self._loader(0, nw, 1)
            self._len[nw] = nw * len(loader)
            loader.close()
        return self._len[nw]

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        w, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        if self.num_workers is not None and \
                (nw if info is not None else 0) != self.num_workers:
            raise ValueError(f"RecordDataset(num_workers={self.num_workers}) read by "
                             f"{nw if info is not None else 0} DataLoader workers: give it "
                             f"the DataLoader's num_workers (its len() counts that many)")
        loader = self._loader(w, nw, self.prefetch)
        for images, labels in loader:
            x = torch.from_dlpack(images)
            y = torch.from_dlpack(labels) if labels is not None else None
            if info is not None or self.copy:   # kept, or leaves the process
                x, y = x.clone(), (y.clone() if y is not None else None)
            yield x, y
