#!/usr/bin/python3
"""The peer of bench/train-vs-pytorch's ResNet-18 row: PyTorch training steps of the
seeds' ResNet-18 (tests/train/ref/make_resnet_reference.py's model) on Fashion-MNIST
batches, SGD lr 0.1, float32, CPU.

  /usr/bin/python3 bench/peers/torch_resnet_steps.py STEPS BATCH THREADS

Reads the first STEPS*BATCH training images (IDX from /usr/share/datasets/fashion-mnist),
runs one warm-up step, then STEPS timed steps, and prints
  "steps N batch B seconds S samples/s R loss_first L0 loss_last L1"
"""
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "train", "ref"))
torch.set_default_dtype(torch.float32)
import make_resnet_reference as R  # noqa: E402  (sets float64 as default: undone below)

torch.set_default_dtype(torch.float32)

steps, batch, threads = (int(a) for a in sys.argv[1:4])
torch.set_num_threads(threads)
d = "/usr/share/datasets/fashion-mnist"
with gzip.open(d + "/train-images-idx3-ubyte.gz") as f:
    imgs = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
with gzip.open(d + "/train-labels-idx1-ubyte.gz") as f:
    labels = np.frombuffer(f.read(), np.uint8, offset=8)
n = steps * batch
x = torch.from_numpy(((imgs[:n].astype(np.float32) / 255.0) - 0.2860) / 0.3530)
y = torch.from_numpy(labels[:n].astype(np.int64))
net = R.ResNet18().float()
opt = torch.optim.SGD(net.parameters(), lr=0.1)


def step(i):
    xb, yb = x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]
    opt.zero_grad()
    loss = F.cross_entropy(net(xb), yb)
    loss.backward()
    opt.step()
    return loss.item()


step(0)
t0 = time.perf_counter()
losses = [step(i) for i in range(steps)]
s = time.perf_counter() - t0
print("steps %d batch %d seconds %.3f samples/s %.1f loss_first %.4f loss_last %.4f" %
      (steps, batch, s, n / s, losses[0], losses[-1]))
