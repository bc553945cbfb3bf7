#!/usr/bin/python3
"""Generate the one-step training references tests/train/ref/mlp.ref and lenet.ref.

Inputs, labels and initial parameters are defined by formula (splitmix64, see
README.md) so the C test can regenerate them bit-for-bit without PyTorch.
PyTorch (Debian python3-torch 1.13, CPU) computes the float32 reference loss,
gradients and the loss after one plain SGD step; a float64 copy of the same
model gives the exact-arithmetic loss and is used for a finite-difference check.

Usage:  /usr/bin/python3 tests/train/ref/make_reference.py [outdir]
        (outdir defaults to the directory of this script)
"""
import math
import os
import random
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MASK64 = (1 << 64) - 1
FORMAT_VERSION = 1

# --------------------------------------------------------------------------
# Formula generators (vectorised numpy, uint64 arithmetic wraps mod 2^64)
# --------------------------------------------------------------------------


def splitmix64_np(x):
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def h_np(stream, n):
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return splitmix64_np((np.uint64(stream) << np.uint64(40)) + i)


def u_np(stream, n):
    # (h >> 40) has 24 bits -> exactly representable in float32; * 2^-24 exact.
    return (h_np(stream, n) >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -24)


def make_inputs(B):
    n = B * 28 * 28
    u = u_np(1, n)
    pix = np.floor(u * np.float32(256.0)).astype(np.float32)  # u8 value 0..255
    x = (pix / np.float32(255.0)).astype(np.float32)          # float32 division
    return x.reshape(B, 1, 28, 28)


def make_labels(B):
    return ((h_np(2, B) >> np.uint64(32)) % np.uint64(10)).astype(np.int64)


def param_scale(fan_in):
    return np.float32(1.0) / np.sqrt(np.float32(fan_in))       # float32 sqrt + div


def make_param(k, shape, fan_in):
    n = int(np.prod(shape))
    u = u_np(100 + k, n)
    s = param_scale(fan_in)
    w = (np.float32(2.0) * u - np.float32(1.0)) * s
    assert w.dtype == np.float32
    return w.reshape(shape)


# --------------------------------------------------------------------------
# Independent pure-Python generators (no numpy) for cross-checking
# --------------------------------------------------------------------------


def f32(v):
    """Round a Python float (double) to the nearest float32."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def splitmix64_py(x):
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def h_py(stream, i):
    return splitmix64_py(((stream << 40) + i) & MASK64)


def u_py(stream, i):
    return (h_py(stream, i) >> 40) / float(1 << 24)


def x_py(i):
    # Double-rounding f32(double op) is exact for +,-,*,/,sqrt of float32 args.
    return f32(float(math.floor(u_py(1, i) * 256.0)) / 255.0)


def label_py(j):
    return (h_py(2, j) >> 32) % 10


def w_py(k, i, fan_in):
    s = f32(1.0 / f32(math.sqrt(float(fan_in))))
    return f32((2.0 * u_py(100 + k, i) - 1.0) * s)


# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------

MODELS = {
    "mlp": dict(
        batch=16, lr=0.1,
        params=[("W1", (256, 784), 784), ("b1", (256,), 784),
                ("W2", (10, 256), 256), ("b2", (10,), 256)],
    ),
    "lenet": dict(
        batch=8, lr=0.2,
        params=[("c1.w", (20, 1, 3, 3), 9), ("c1.b", (20,), 9),
                ("c2.w", (50, 20, 5, 5), 500), ("c2.b", (50,), 500),
                ("f1.w", (128, 800), 800), ("f1.b", (128,), 800),
                ("f2.w", (10, 128), 128), ("f2.b", (10,), 128)],
    ),
}


def forward(model, P, x):
    if model == "mlp":
        h = F.relu(F.linear(x.flatten(1), P["W1"], P["b1"]))
        return F.linear(h, P["W2"], P["b2"])
    h = F.avg_pool2d(F.relu(F.conv2d(x, P["c1.w"], P["c1.b"])), 2, 2)   # 20x13x13
    h = F.avg_pool2d(F.relu(F.conv2d(h, P["c2.w"], P["c2.b"])), 2, 2)   # 50x4x4
    h = F.relu(F.linear(h.flatten(1), P["f1.w"], P["f1.b"]))
    return F.linear(h, P["f2.w"], P["f2.b"])


def loss_and_grads(model, P, x, y):
    for t in P.values():
        t.grad = None
    logits = forward(model, P, x)
    loss = nn.CrossEntropyLoss()(logits, y)
    loss.backward()
    return loss, logits


def fmt(v):
    return "%.9g" % v


def build(model):
    cfg = MODELS[model]
    B, lr = cfg["batch"], cfg["lr"]
    xn = make_inputs(B)
    yn = make_labels(B)
    pn = {name: make_param(k, shape, fan)
          for k, (name, shape, fan) in enumerate(cfg["params"])}

    # ---- cross-check generators against the pure-Python version ----------
    rng = random.Random(12345)
    xf = xn.reshape(-1)
    for i in [0, 1, 2, 783, len(xf) - 1] + [rng.randrange(len(xf)) for _ in range(20)]:
        assert float(xf[i]) == x_py(i), ("x", i)
    for j in range(B):
        assert int(yn[j]) == label_py(j), ("y", j)
    for k, (name, shape, fan) in enumerate(cfg["params"]):
        wf = pn[name].reshape(-1)
        for i in [0, len(wf) - 1] + [rng.randrange(len(wf)) for _ in range(20)]:
            assert float(wf[i]) == w_py(k, i, fan), (name, i)

    # ---- float32 reference ----------------------------------------------
    x32 = torch.from_numpy(xn.copy())
    y = torch.from_numpy(yn.copy())
    P32 = {n: torch.from_numpy(v.copy()).requires_grad_(True) for n, v in pn.items()}
    loss32, logits32 = loss_and_grads(model, P32, x32, y)
    correct = int((logits32.argmax(1) == y).sum())
    G32 = {n: t.grad.detach().clone() for n, t in P32.items()}

    # ---- float64 (same float32 values, exact-ish arithmetic) --------------
    x64 = x32.double()
    P64 = {n: torch.from_numpy(v.astype(np.float64)).requires_grad_(True) for n, v in pn.items()}
    loss64, _ = loss_and_grads(model, P64, x64, y)
    G64 = {n: t.grad.detach().clone() for n, t in P64.items()}

    # ---- finite-difference check of 3 random parameters in float64 --------
    fd_notes = []
    names = [p[0] for p in cfg["params"]]
    for _ in range(3):
        name = rng.choice(names)
        idx = rng.randrange(P64[name].numel())
        eps = 1e-6
        with torch.no_grad():
            flat = P64[name].reshape(-1)
            orig = flat[idx].item()
            flat[idx] = orig + eps
            lp = nn.CrossEntropyLoss()(forward(model, P64, x64), y).item()
            flat[idx] = orig - eps
            lm = nn.CrossEntropyLoss()(forward(model, P64, x64), y).item()
            flat[idx] = orig
        fd = (lp - lm) / (2 * eps)
        an = G64[name].reshape(-1)[idx].item()
        err = abs(fd - an)
        assert err <= 1e-6 * max(1.0, abs(an)) + 1e-9, (model, name, idx, fd, an)
        fd_notes.append("# fd-check %s[%d]: autograd_f64 %.12g  central-diff %.12g  |diff| %.2e"
                        % (name, idx, an, fd, err))

    # ---- float32 vs float64 gradient agreement ---------------------------
    gdiff = {}
    for n in names:
        d = (G32[n].double() - G64[n]).abs().max().item()
        scale = G64[n].abs().max().item()
        gdiff[n] = (d, scale)
        assert d <= 1e-4 * scale + 1e-7, (model, n, d, scale)
    assert abs(loss32.item() - loss64.item()) <= 1e-5 * abs(loss64.item())

    # ---- one SGD step in float32, loss after ----------------------------
    opt = torch.optim.SGD(list(P32.values()), lr=lr)   # no momentum / decay
    opt.step()
    with torch.no_grad():
        loss_after = nn.CrossEntropyLoss()(forward(model, P32, x32), y).item()
    # torch's SGD (p.add_(g, alpha=-lr)) rounds once: p_new = fl32(p - lr32*g),
    # like C's fmaf(-lr32, g, p).  Check that, and that the unfused float32
    # update p - lr32*g (two roundings) is within a rounding of it.
    upd_notes = []
    for n in names:
        p0 = torch.from_numpy(pn[n])
        fused = (p0.double() - float(np.float32(lr)) * G32[n].double()).float()
        assert torch.equal(fused, P32[n].detach()), n
        unfused = p0 - np.float32(lr) * G32[n]
        nd = int((unfused != fused).sum())
        # two roundings: |err| <= ulp(lr*g)/2 + ulp(result)/2 (cancellation!)
        bound = torch.from_numpy(np.spacing(np.abs(fused.numpy())) +
                                 np.spacing(np.abs((np.float32(lr) * G32[n]).numpy())))
        assert bool(((unfused - fused).abs() <= bound).all()), n
        upd_notes.append("%s %d/%d" % (n, nd, p0.numel()))
    with torch.no_grad():
        Pu = {n: (torch.from_numpy(pn[n]) - np.float32(lr) * G32[n]) for n in names}
        loss_after_unfused = nn.CrossEntropyLoss()(forward(model, Pu, x32), y).item()

    # ---- write ------------------------------------------------------------
    L = []
    L.append("# ringflow one-step training reference (format version %d)" % FORMAT_VERSION)
    L.append("# generated by: /usr/bin/python3 tests/train/ref/make_reference.py  (torch %s, CPU, float32)"
             % torch.__version__)
    L.append("# Inputs/labels/params are defined by splitmix64 formulas: see tests/train/ref/README.md.")
    L.append("# Lines: '<key> <values...>'; lines starting with '#' are comments; ignore unknown keys.")
    L.append("# x_sum = sum of all x (float64, exactly rounded); y_sum = sum of labels;")
    L.append("# init_sum = float64 sum of the initial float32 parameter tensor (exactly rounded).")
    L.append("# 'param NAME d0 [d1 ...]' starts a tensor (init stream = 100 + its order k, from 0);")
    L.append("# then 'fan_in', 'init_sum', 'grad_l2 G grad_sum S grad_absmax M' (float32 grads,")
    L.append("# statistics taken in float64), 'gcount N', then N lines 'g <flat index> <grad>'.")
    L.append("# g lines: every element if numel <= 4096, else indices i*stride for i=0..1023,")
    L.append("# stride = numel/1024 (floor), followed by the index of max |grad| (may repeat).")
    L.append("# loss, loss_after_step: float32 PyTorch; loss_f64: same float32 inputs/params in float64.")
    L.append("# loss_after_step: loss of the same batch after p -= lr*grad (plain SGD, float32).")
    L.extend(fd_notes)
    L.append("# SGD update as torch does it: p_new = fl32(p - fl32(lr)*g) with ONE rounding")
    L.append("# (C: fmaf(-lr, g, p)).  Elements where an unfused p - lr*g differs (last bits):")
    for i in range(0, len(upd_notes), 4):
        L.append("#   " + ", ".join(upd_notes[i:i + 4]))
    L.append("# loss after an unfused update would be %.9g (vs %.9g)."
             % (loss_after_unfused, loss_after))
    for n in names:
        d, s = gdiff[n]
        L.append("# grad %s: max|g_f32 - g_f64| = %.3e (absmax %.3e)" % (n, d, s))
    L.append("model %s" % model)
    L.append("batch %d" % B)
    L.append("lr %s" % fmt(lr))
    L.append("x_sum %.17g" % math.fsum(float(v) for v in xf))
    L.append("y_sum %d" % int(yn.sum()))
    L.append("labels %s" % " ".join(str(int(v)) for v in yn))
    L.append("loss %s" % fmt(loss32.item()))
    L.append("loss_f64 %.17g" % loss64.item())
    L.append("loss_after_step %s" % fmt(loss_after))
    L.append("correct %d" % correct)
    for n, shape, fan in cfg["params"]:
        g = G32[n].double().reshape(-1)
        numel = g.numel()
        L.append("param %s %s" % (n, " ".join(str(d) for d in shape)))
        L.append("fan_in %d" % fan)
        L.append("init_sum %.17g" % math.fsum(float(v) for v in pn[n].reshape(-1)))
        L.append("grad_l2 %s grad_sum %s grad_absmax %s" % (
            fmt(math.sqrt(math.fsum(float(v) ** 2 for v in g.tolist()))),
            fmt(math.fsum(g.tolist())),
            fmt(g.abs().max().item())))
        amax = int(g.abs().argmax().item())
        if numel <= 4096:
            idxs = list(range(numel))
        else:
            stride = numel // 1024
            idxs = [i * stride for i in range(1024)] + [amax]
        L.append("gcount %d" % len(idxs))
        g32 = G32[n].reshape(-1)
        for i in idxs:
            L.append("g %d %s" % (i, fmt(g32[i].item())))
    L.append("end")
    return "\n".join(L) + "\n", loss32.item(), loss64.item(), loss_after, correct


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for model in ("mlp", "lenet"):
        text, l32, l64, la, c = build(model)
        path = os.path.join(outdir, model + ".ref")
        with open(path, "w") as f:
            f.write(text)
        print("%s: loss %.9g loss_f64 %.17g after_step %.9g correct %d -> %s (%d bytes)"
              % (model, l32, l64, la, c, path, len(text)))


if __name__ == "__main__":
    main()
