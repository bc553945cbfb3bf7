#!/usr/bin/python3
"""small-fmnist.py SRC DST [TRAIN [TEST]] -- the first TRAIN (default 384) training and
TEST (default 16) test records of Fashion-MNIST in SRC (gzip'd or raw IDX) as raw IDX
files in DST: a data set rf-train loads in a fraction of a second, for tests that run
it many times."""
import gzip, os, sys

src, dst = sys.argv[1], sys.argv[2]
ntrain = int(sys.argv[3]) if len(sys.argv) > 3 else 384
ntest = int(sys.argv[4]) if len(sys.argv) > 4 else 16


def rd(name):
    p = os.path.join(src, name)
    return gzip.open(p + ".gz").read() if os.path.exists(p + ".gz") else open(p, "rb").read()


for part, n in (("train", ntrain), ("t10k", ntest)):
    img, lab = rd(part + "-images-idx3-ubyte"), rd(part + "-labels-idx1-ubyte")
    with open(os.path.join(dst, part + "-images-idx3-ubyte"), "wb") as f:
        f.write(img[:4] + n.to_bytes(4, "big") + img[8:16] + img[16:16 + n * 784])
    with open(os.path.join(dst, part + "-labels-idx1-ubyte"), "wb") as f:
        f.write(lab[:4] + n.to_bytes(4, "big") + lab[8:8 + n])
