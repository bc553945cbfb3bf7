#!/usr/bin/python3
"""unpack.py SRC DST: Fashion-MNIST for the tests, once per build. The four IDX files of
SRC (the installed dataset: gzip'd, or raw) are written raw into DST, so that the many
runs of the tests do not each inflate 26 MB (a fifth of the train suite's CPU was
zlib's); beside each, NAME.gz links to SRC's own NAME.gz, for the tests that read the
compressed files by name (rf-pack --images, the gzip path of the loader). rf-train
takes the raw file where both are there."""
import gzip, os, shutil, sys

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
    out, gz = os.path.join(dst, name), os.path.join(src, name + ".gz")
    with open(out + ".tmp", "wb") as f:
        if os.path.exists(os.path.join(src, name)):
            with open(os.path.join(src, name), "rb") as i:
                shutil.copyfileobj(i, f, 1 << 20)
        else:
            with gzip.open(gz) as i:
                shutil.copyfileobj(i, f, 1 << 20)
    os.replace(out + ".tmp", out)
    link = out + ".gz"
    if os.path.lexists(link):
        os.unlink(link)
    if os.path.exists(gz):
        os.symlink(os.path.abspath(gz), link)
