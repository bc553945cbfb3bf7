#!/usr/bin/python3
"""ResNet-18 (the seeds' resnet18(10)) and its new layers in PyTorch, in float64, for
tests/train/test-resnet-ref.c.

Every input, weight and output gradient is made by the same integer hash on both
sides, rounded to float32 (a BN's gamma and a running variance: 1 + value, rounded),
so nothing large is stored:
  z = splitmix64(i + (salt + 1) * 0x9E3779B97F4A7C15)   (all mod 2**64)
  u = (z >> 11) / 2**53,  value = (u - 0.5) * 2 * scale
Layer cases store their outputs and gradients whole. The ResNet-18 step (4 images,
train mode, mean cross-entropy, backward) stores the loss, the eval-mode loss after
it, and per parameter / running statistic: numel, sum, sum of |x|, L2 norm and 32
samples at i_j = (j * 2654435761 + k) mod numel.

  /usr/bin/python3 tests/train/ref/make_resnet_reference.py [OUT]  (default tests/train/ref/resnet.ref)
"""
import copy
import math
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


def hashed(salt, shape, scale):
    n = math.prod(shape)
    with np.errstate(over="ignore"):
        z = np.arange(n, dtype=np.uint64) + np.uint64(((salt + 1) * 0x9E3779B97F4A7C15) % (1 << 64))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    v = ((u - 0.5) * 2.0 * scale).astype(np.float32).astype(np.float64)
    return torch.from_numpy(v).reshape(shape)


class Residual(nn.Module):
    def __init__(self, cin, c, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.conv3 = nn.Conv2d(cin, c, 1, stride) if stride != 1 else None

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.conv3(x) if self.conv3 is not None else x))


class ResNet18(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        cin = 64
        for s in range(1, 5):
            c = 64 << (s - 1)
            blocks = [Residual(cin, c, 2 if s > 1 else 1), Residual(c, c, 1)]
            setattr(self, "layer%d" % s, nn.Sequential(*blocks))
            cin = c
        self.fc = nn.Linear(512, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        for s in range(1, 5):
            x = getattr(self, "layer%d" % s)(x)
        return self.fc(x.mean((2, 3)))


def put(out, tag, name, t):
    v = t.detach().reshape(-1)
    out.write("%s %s %d %s\n" % (tag, name, v.numel(), " ".join("%.17g" % x for x in v.tolist())))


def summary(out, name, k, t):
    v = t.detach().reshape(-1)
    n = v.numel()
    idx = [(j * 2654435761 + k) % n for j in range(32)]
    out.write("t %s %d %.17g %.17g %.17g %s\n" % (
        name, n, v.sum().item(), v.abs().sum().item(), v.norm().item(),
        " ".join("%.17g" % v[i].item() for i in idx)))


def layer_cases(out):
    # conv 3x3 stride 2 pad 1 and 1x1 stride 2 (with bias), forward and both gradients
    for name, (n, c, h, o, k, s, p, bias) in {
            "conv3s2p1": (2, 3, 9, 4, 3, 2, 1, False),
            "conv1s2": (2, 3, 7, 5, 1, 2, 0, True),
            "conv3p1": (2, 2, 6, 3, 3, 1, 1, True)}.items():
        x = hashed(1, (n, c, h, h), 1.0).requires_grad_()
        w = hashed(2, (o, c, k, k), 0.5).requires_grad_()
        b = hashed(3, (o,), 0.5).requires_grad_() if bias else None
        y = F.conv2d(x, w, b, s, p)
        dy = hashed(4, tuple(y.shape), 1.0)
        y.backward(dy)
        out.write("case %s %d %d %d %d %d %d %d %d\n" % (name, n, c, h, o, k, s, p, int(bias)))
        put(out, "v", "y", y)
        put(out, "v", "dx", x.grad)
        put(out, "v", "dw", w.grad)
        if bias:
            put(out, "v", "db", b.grad)
    # batch norm, training then evaluation with the updated running statistics
    n, c, h = 3, 4, 5
    x = hashed(1, (n, c, h, h), 2.0).requires_grad_()
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        bn.weight.copy_((1.0 + hashed(2, (c,), 0.5)).float())
        bn.bias.copy_(hashed(3, (c,), 0.5))
        bn.running_mean.copy_(hashed(5, (c,), 0.2))
        bn.running_var.copy_((1.0 + hashed(6, (c,), 0.5)).float())
    y = bn(x)
    dy = hashed(4, (n, c, h, h), 1.0)
    y.backward(dy)
    out.write("case bn %d %d %d\n" % (n, c, h))
    put(out, "v", "y", y)
    put(out, "v", "dx", x.grad)
    put(out, "v", "dgamma", bn.weight.grad)
    put(out, "v", "dbeta", bn.bias.grad)
    put(out, "v", "run_mean", bn.running_mean)
    put(out, "v", "run_var", bn.running_var)
    bn.eval()
    put(out, "v", "y_eval", bn(x))
    # max pool 3x3 stride 2, and 2x2 stride 2 with ties; global average pool
    for name, (n, c, h, k, s, ties) in {"maxpool3s2": (2, 3, 9, 3, 2, False),
                                        "maxpool2ties": (1, 2, 6, 2, 2, True)}.items():
        x = hashed(1, (n, c, h, h), 1.0)
        if ties:
            x = (x * 4).round() / 4
        x.requires_grad_()
        y = F.max_pool2d(x, k, s)
        y.backward(hashed(4, tuple(y.shape), 1.0))
        out.write("case %s %d %d %d %d %d %d\n" % (name, n, c, h, k, s, int(ties)))
        put(out, "v", "y", y)
        put(out, "v", "dx", x.grad)
    x = hashed(1, (2, 3, 5, 5), 1.0).requires_grad_()
    y = x.mean((2, 3))
    y.backward(hashed(4, (2, 3), 1.0))
    out.write("case gap 2 3 5\n")
    put(out, "v", "y", y)
    put(out, "v", "dx", x.grad)


def relu_margin(net, x):
    """The smallest |input| of any ReLU in the forward on x (float64)."""
    low = [float("inf")]

    def relu(t):
        low[0] = min(low[0], t.abs().min().item())
        return torch.relu(t)
    real, F.relu = F.relu, relu
    try:
        with torch.no_grad():
            net(x)
    finally:
        F.relu = real
    return low[0]


def resnet_case(out):
    net = ResNet18()
    params = list(net.named_parameters())
    with torch.no_grad():
        for k, (name, p) in enumerate(params):
            if name.endswith("bn1.weight") or name.endswith("bn2.weight"):
                p.copy_((1.0 + hashed(100 + k, tuple(p.shape), 0.1)).float())
            elif p.dim() == 1:
                p.copy_(hashed(100 + k, tuple(p.shape), 0.1))
            else:
                fan_in = p[0].numel()
                p.copy_(hashed(100 + k, tuple(p.shape), math.sqrt(6.0 / fan_in)))
    # A ReLU input within float32 rounding of 0 switches its unit off in one precision
    # and on in the other, and that one element's gradient then differs by its whole
    # size: take the first input salt whose forward keeps every ReLU input 2e-6 away.
    for salt in range(7, 200):
        x = hashed(salt, (4, 1, 28, 28), 1.0)
        margin = relu_margin(copy.deepcopy(net), x)  # (a copy: train mode moves the running statistics)
        if margin > 2e-6:
            break
    y = torch.tensor([3, 1, 4, 9])
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    out.write("case resnet18 4 %d\n" % salt)
    out.write("# smallest |ReLU input| in the forward: %.3g\n" % margin)
    out.write("loss %.17g\n" % loss.item())
    for k, (name, p) in enumerate(params):
        summary(out, name, k, p.grad)
    bufs = [(n, b) for n, b in net.named_buffers() if "running" in n]
    for k, (name, b) in enumerate(bufs):
        summary(out, name, k, b)
    net.eval()
    with torch.no_grad():
        out.write("eval_loss %.17g\n" % F.cross_entropy(net(x), y).item())


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "tests/train/ref/resnet.ref"
    with open(path, "w") as out:
        out.write("# PyTorch %s, float64; see make_resnet_reference.py\n" % torch.__version__)
        layer_cases(out)
        resnet_case(out)


if __name__ == "__main__":
    main()
