"""test_images: ringflow.Loader over a folder of images packed by rf-pack --image-folder.

PNG files are written here (zlib only: a flat colour per class, sizes 20..90), packed
with the rf-pack named in RF_PACK, and read with Loader(image_size=16): x is
(n, 3, 16, 16), every pixel its class's colour (a PNG is lossless and the resize of a
flat image is exact), y the class, each record once per epoch, in training
(RandomResizedCrop + flip) and evaluation (augment=False); two loaders with different
worker counts give the same bytes; dtype="uint8" gives the bytes themselves (255 x the
float32 batch). image_size on a fixed-size file, or a missing one
on an image file, raises ValueError/OSError carrying the library's message.
Exit 0 or 1 (77: no numpy).
"""
import os
import struct
import subprocess
import sys
import tempfile
import zlib

try:
    import numpy as np
except ImportError:
    sys.exit(77)

import ringflow

COLOURS = [(220, 30, 30), (30, 220, 30), (30, 30, 220)]


def png(path, w, h, rgb):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    raw = b"".join(b"\0" + bytes(rgb) * w for _ in range(h))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


def main():
    T = tempfile.mkdtemp(prefix="rf-python-images.")
    root = os.path.join(T, "tree")
    n = 0
    for k, name in enumerate(["ant", "bee", "cat"]):
        os.makedirs(os.path.join(root, name))
        for i in range(7):
            png(os.path.join(root, name, f"{i}.png"), 20 + 10 * i, 90 - 9 * i, COLOURS[k])
            n += 1
    out = os.path.join(T, "tree.rfrec")
    subprocess.run([os.environ["RF_PACK"], "--image-folder", root, "-o", out], check=True,
                   stdout=subprocess.DEVNULL)
    runs = {}
    for augment in (True, False):
        for workers in (1, 2):
            ld = ringflow.Loader(out, 4, seed=3, image_size=16, augment=augment,
                                 workers=workers)
            xs, ys = [], []
            for bx, by in ld:
                xs.append(np.array(np.from_dlpack(bx)))
                ys.append(np.array(np.from_dlpack(by)))
            del bx, by
            ld.close()
            x, y = np.concatenate(xs), np.concatenate(ys)
            assert x.shape == (n, 3, 16, 16), x.shape
            assert sorted(np.bincount(y).tolist()) == [7, 7, 7], y
            for j in range(n):
                want = np.array(COLOURS[y[j]], dtype=np.float32)[:, None, None] / 255.0
                assert np.abs(x[j] - want).max() < 1e-6, (j, y[j], x[j][:, 0, 0])
            runs[(augment, workers)] = (x, y)
        assert all((runs[(augment, 1)][k] == runs[(augment, 2)][k]).all() for k in (0, 1))
    # the bytes themselves: uint8, 255 x the float32 batch
    ld = ringflow.Loader(out, 4, seed=3, image_size=16, dtype="uint8")
    xs = []
    for bx, by in ld:
        xs.append(np.array(np.from_dlpack(bx)))
    del bx, by
    ld.close()
    xu = np.concatenate(xs)
    assert xu.dtype == np.uint8 and xu.shape == (n, 3, 16, 16)
    assert (np.rint(runs[(True, 1)][0] * 255.0) == xu).all()
    fm = os.path.join(T, "fixed.rfrec")
    ringflow.pack(fm, np.zeros((8, 4, 4), dtype=np.uint8), np.arange(8) % 2, num_classes=2)
    for path, kw, text in ((fm, {"image_size": 8}, "not encoded images"),
                           (out, {}, "expected the size to decode them to")):
        try:
            ringflow.Loader(path, 4, **kw)
        except (ValueError, OSError) as e:
            assert text in str(e), str(e)
        else:
            raise AssertionError(f"{path} {kw}: no error")
    print(f"ringflow python images: {n} images, 5 loaders ok")


if __name__ == "__main__":
    main()
