#!/usr/bin/python3
"""SGD with momentum, weight decay and Nesterov, and AdamW: what torch.optim.SGD and
torch.optim.AdamW (PyTorch 1.13, CPU, float32) compute over three steps, for
tests/train/test-sgd-ref.c (AdamW: w, exp_avg and exp_avg_sq after the steps).

Parameters and gradients come from the splitmix64 generators of README.md (the same
u(stream, i) as the model references): w[i] = 2*u(300, i) - 1, and the gradient of
step t is g_t[i] = (2*u(301 + t, i) - 1) * 0.5. Each configuration starts from the
same w with no momentum buffer (PyTorch's first step clones d); with momentum 0
there is none, and v is listed as zeros. The file lists, per
configuration, w and the momentum buffer after the three steps as the hex of their
float32 bits.

  /usr/bin/python3 tests/train/ref/make_sgd_reference.py [OUT]   (default tests/train/ref/sgd.ref)
"""
import struct
import sys

import numpy as np
import torch

from make_reference import u_py  # the splitmix64 generators of README.md

N = 512
LR = 0.1
STEPS = 3
CONFIGS = [  # momentum, weight decay, nesterov
    (0.0, 5e-4, False),  # plain SGD with weight decay: no buffer (v listed as zeros)
    (0.9, 0.0, False),
    (0.9, 5e-4, False),
    (0.9, 5e-4, True),
    (0.5, 1e-2, True),
]
ADAMW = [  # lr, weight decay (betas 0.9, 0.999; eps 1e-8)
    (1e-3, 0.0),
    (1e-3, 1e-2),
    (3e-2, 0.1),
]


def u(stream, i):
    return np.float32(u_py(stream, i))   # exact: a 24-bit integer over 2^24


def vec(stream, scale):
    return np.array([(np.float32(2.0) * u(stream, i) - np.float32(1.0)) * np.float32(scale)
                     for i in range(N)], dtype=np.float32)


def bits(a):
    return " ".join("%08x" % struct.unpack("<I", struct.pack("<f", float(x)))[0] for x in a)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/train/ref/sgd.ref"
    torch.set_num_threads(1)
    w0 = vec(300, 1.0)
    grads = [vec(301 + t, 0.5) for t in range(STEPS)]
    lines = ["# torch.optim.SGD, PyTorch %s, CPU float32: %d elements, lr %g, %d steps"
             % (torch.__version__, N, LR, STEPS),
             "# w = 2*u(300,i)-1; g_t = (2*u(301+t,i)-1)*0.5 (tests/train/ref/README.md)"]
    for mom, wd, nest in CONFIGS:
        p = torch.nn.Parameter(torch.from_numpy(w0.copy()))
        opt = torch.optim.SGD([p], lr=LR, momentum=mom, weight_decay=wd, nesterov=nest)
        for t in range(STEPS):
            p.grad = torch.from_numpy(grads[t].copy())
            opt.step()
        v = opt.state[p].get("momentum_buffer")
        if v is None:
            v = torch.zeros(N)
        lines.append("config momentum %r weight_decay %r nesterov %d" % (mom, wd, int(nest)))
        lines.append("w " + bits(p.detach().numpy()))
        lines.append("v " + bits(v.numpy()))
    for lr, wd in ADAMW:
        p = torch.nn.Parameter(torch.from_numpy(w0.copy()))
        opt = torch.optim.AdamW([p], lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
        for t in range(STEPS):
            p.grad = torch.from_numpy(grads[t].copy())
            opt.step()
        st = opt.state[p]
        lines.append("adamw lr %r weight_decay %r" % (lr, wd))
        lines.append("w " + bits(p.detach().numpy()))
        lines.append("m " + bits(st["exp_avg"].numpy()))
        lines.append("v " + bits(st["exp_avg_sq"].numpy()))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
