"""bench/peers/tree_pss.py -- the peak memory of a process and its children, as PSS
(proportional set size: a page shared by k processes counts 1/k in each), sampled every
50 ms from /proc/PID/smaps_rollup by a thread of the measured process. Summing each
worker's RSS (or the largest worker's ru_maxrss times the workers) counts the pages a
forked DataLoader worker shares with its parent once per worker; PSS counts them once.

    from tree_pss import PeakPss
    with PeakPss() as m:
        ...                 # the measured work
    m.peak_kib              # the largest sum seen (KiB), the end's sample included
"""
import os
import threading


def _children(pid):
    kids = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def _pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss_kib(pid=None):
    """The PSS of pid (default: this process) and all its descendants, in KiB."""
    todo, total, seen = [pid or os.getpid()], 0, set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += _pss_kib(p)
        todo += _children(p)
    return total


class PeakPss:
    def __init__(self, interval=0.05):
        self.interval, self.peak_kib = interval, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, tree_pss_kib())
            self._stop.wait(self.interval)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self.peak_kib = max(self.peak_kib, tree_pss_kib())
        self._stop.set()
        self._t.join()
        return False
