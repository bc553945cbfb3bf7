"""bench/peers/tree_pss.py -- the peak memory of a process and its children, as PSS
(proportional set size: a page shared by k processes counts 1/k in each), sampled every
200 ms from /proc/PID/smaps_rollup by a thread of the benchmark's driver -- not of the
measured process, whose clock it would slow (reading a 1 GiB tree of a parent and two
forked workers takes 12-18 ms here; the driver's thread runs beside every side alike).
Summing each worker's RSS (or the largest worker's ru_maxrss times the workers) counts
the pages a forked DataLoader worker shares with its parent once per worker; PSS counts
them once.

    from tree_pss import run_sampled
    proc, peak_kib = run_sampled(argv, **popen_kwargs)   # a CompletedProcess, KiB
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


def run_sampled(argv, interval=0.2, **kw):
    """Run argv (subprocess.Popen's keywords: stdout, stderr, text, env ...) to its end
    while a thread samples its tree's PSS; (a CompletedProcess, the peak in KiB)."""
    import subprocess
    proc = subprocess.Popen(argv, **kw)
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], tree_pss_kib(proc.pid))
            done.wait(interval)
    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = proc.communicate()
    done.set()
    t.join()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), peak[0]
