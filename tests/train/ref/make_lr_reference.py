#!/usr/bin/python3
"""Learning rates per epoch from PyTorch 1.13's schedulers, for tests/train/test-lr-ref.c.

For each setting: LinearLR(start_factor=1/(W+1), end_factor=1, total_iters=W) for the
warm-up (none when W = 0), then StepLR(step_size, gamma), CosineAnnealingLR(T_max=E-W,
eta_min=0) or nothing (constant), joined by SequentialLR(milestones=[W]); the lr read
from the optimiser before each of E epochs, written with %.17g.

  /usr/bin/python3 tests/train/ref/make_lr_reference.py [OUT]   (default tests/train/ref/lr.ref)
"""
import sys

import torch

BASE = 0.1
SETTINGS = [  # kind, step_epochs, gamma, warmup, epochs
    ("constant", 0, 0.0, 0, 12),
    ("constant", 0, 0.0, 3, 12),
    ("step", 4, 0.1, 0, 12),
    ("step", 3, 0.5, 2, 12),
    ("cosine", 0, 0.0, 0, 12),
    ("cosine", 0, 0.0, 4, 20),
]


def main_sched(opt, kind, step, gamma, w, e):
    if kind == "step":
        return torch.optim.lr_scheduler.StepLR(opt, step_size=step, gamma=gamma)
    if kind == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=e - w, eta_min=0)
    return torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)


def rates(kind, step, gamma, w, e):
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=BASE)
    if w:
        warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / (w + 1),
                                                 end_factor=1.0, total_iters=w)
        sched = torch.optim.lr_scheduler.SequentialLR(
            opt, [warm, main_sched(opt, kind, step, gamma, w, e)], milestones=[w])
    else:
        sched = main_sched(opt, kind, step, gamma, w, e)
    out = []
    for _ in range(e):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/train/ref/lr.ref"
    lines = ["# PyTorch %s schedulers, base lr %g: kind step gamma warmup epochs, then the lr "
             "of each epoch" % (torch.__version__, BASE)]
    for kind, step, gamma, w, e in SETTINGS:
        lines.append("%s %d %r %d %d %s" % (kind, step, gamma, w, e,
                                            " ".join("%.17g" % r for r in rates(kind, step, gamma, w, e))))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
