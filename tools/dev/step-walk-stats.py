#!/usr/bin/python3
"""step-walk-stats.py TRACE ROOT [-v] -- what tools/dev/step-walk-trace.c recorded, as
the walk of one training step: for each table ("call": the step's own thread inside
rf__train_iter; "window": every thread from that step to the next), the calls into the
library's functions (stops), the distinct functions and files, the calls from train/
into a lower layer (each one a climb back up into train when it returns), and the
calls from a lower layer up into a higher one (callbacks). ROOT: the source tree the
build was compiled from (its paths name the layers). -v lists every function."""
import collections, os, subprocess, sys

LAYERS = {"ring": 0, "common": 0, "core": 1, "devices": 2, "comm": 2, "dataloader": 3,
          "train": 4}


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    trace, root, verbose = sys.argv[1], os.path.realpath(sys.argv[2]) + "/", "-v" in sys.argv
    rows = [l.split() for l in open(trace)]
    want = collections.defaultdict(set)
    for _, a, ao, b, bo, _ in rows:
        if a != "-":
            want[a].add(ao)
        want[b].add(bo)
    where = {}
    for obj, offs in want.items():
        offs = sorted(offs)
        out = subprocess.run(["addr2line", "-f", "-e", obj] + ["0x" + o for o in offs],
                             capture_output=True, text=True, check=True).stdout.split("\n")
        for i, o in enumerate(offs):
            fn, loc = out[2 * i], out[2 * i + 1].split(":")[0]
            loc = os.path.realpath(loc) if loc.startswith("/") else loc
            rel = loc[len(root):] if loc.startswith(root) else None
            top = rel.split("/")[0] if rel else None
            where[(obj, o)] = (fn, rel, LAYERS.get(top)) if top in LAYERS else None
    for table in ("call", "window"):
        stops, down, up = collections.Counter(), collections.Counter(), collections.Counter()
        for t, a, ao, b, bo, n in rows:
            if t != table or not where.get((b, bo)):
                continue
            fb, lb_file, lb = where[(b, bo)]
            stops[(fb, lb_file)] += int(n)
            wa = where.get((a, ao)) if a != "-" else None
            if not wa:
                continue
            if wa[2] == 4 and lb < 4:
                down[(wa[0], wa[1], fb, lb_file)] += int(n)
            elif wa[2] < lb:
                up[(wa[0], wa[1], fb, lb_file)] += int(n)
        files = {f for _, f in stops}
        layers = collections.Counter(f.split("/")[0] for _, f in stops)
        print(f"{table}: {len(stops)} functions in {len(files)} files, {sum(stops.values())} "
              f"calls; train -> lower layers {sum(down.values())} calls ({len(down)} edges); "
              f"lower -> higher {sum(up.values())} calls ({len(up)} edges)")
        print("  functions per layer: " + ", ".join(f"{k} {v}" for k, v in sorted(layers.items())))
        if verbose:
            for (fn, f), n in sorted(stops.items(), key=lambda x: (x[0][1], x[0][0])):
                print(f"    {n:7d}  {f}: {fn}")
            for (a, fa, b, fb), n in sorted(up.items()):
                print(f"    up {n:5d}  {fa}: {a} -> {fb}: {b}")


main()
