"""test_images: ringflow.Loader over a folder of images packed by rf-pack --image-folder.

PNG files are written here (zlib only: a flat colour per class, sizes 20..90), packed
with the rf-pack named in RF_PACK, and read with Loader(image_size=16): x is
(n, 3, 16, 16), every pixel its class's colour (a PNG is lossless and the resize of a
flat image is exact), y the class, each record once per epoch, in training
(RandomResizedCrop + flip) and evaluation (augment=False); two loaders with different
worker counts give the same bytes; dtype="uint8" gives the bytes themselves (255 x the
float32 batch); mean/std per channel give torchvision's Normalize in float32, and
refusals name the argument; layout="nhwc" gives (n, S, S, 3); skip_bad_images replaces
a corrupt image by its batch neighbour, counts it and says so (a ringflow.Warning,
an error under an error filter, raised before the next batch is taken: none is lost).
image_size on a fixed-size file,
or a missing one
on an image file, raises ValueError/OSError carrying the library's message.
Exit 0 or 1 (77: no numpy).
"""
import atexit
import os
import shutil
import struct
import subprocess
import warnings
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
    atexit.register(shutil.rmtree, T, True)   # the files made, gone at exit
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
    # a mean and std per channel (ImageNet's): (u8 / 255 - mean[c]) / std[c] in float32,
    # each step rounded as written; a number beside a sequence is broadcast
    m3, s3 = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    for mean, std in ((m3, s3), (m3, 0.5), (0.25, s3)):
        ld = ringflow.Loader(out, 4, seed=3, image_size=16, mean=mean, std=std)
        xs = []
        for bx, by in ld:
            xs.append(np.array(np.from_dlpack(bx)))
        del bx, by
        ld.close()
        mc = np.array(mean if isinstance(mean, tuple) else (mean,) * 3, dtype=np.float32)
        sc = np.array(std if isinstance(std, tuple) else (std,) * 3, dtype=np.float32)
        t = xu.astype(np.float32) * np.float32(1 / 255)
        want = (t - mc[None, :, None, None]) / sc[None, :, None, None]
        assert (np.concatenate(xs) == want).all(), (mean, std)
    for kw, exc, text in (({"mean": (0.1, 0.2), "std": s3}, ValueError, "expected one per"),
                          ({"mean": (0.1, 0.2), "std": (1, 1)}, ringflow.Error,
                           "norm_channels 2: the records are 3 channels"),
                          ({"mean": (), "std": 1}, ValueError, "1 to 4"),
                          ({"mean": m3, "std": (1, 0, 1)}, ValueError, "std[1]=0.0"),
                          ({"mean": ("a",), "std": 1}, TypeError, "mean[0]")):
        try:
            ringflow.Loader(out, 4, image_size=16, **kw)
        except exc as e:
            assert text in str(e), str(e)
        else:
            raise AssertionError(f"{kw}: no error")
    # layout="nhwc": (n, 16, 16, 3), the same bytes with each pixel's channels together
    ld = ringflow.Loader(out, 4, seed=3, image_size=16, dtype="uint8", layout="nhwc")
    xs = [np.array(np.from_dlpack(bx)) for bx, by in ld]
    ld.close()
    xh = np.concatenate(xs)
    assert xh.shape == (n, 16, 16, 3), xh.shape
    assert (xh == xu.transpose(0, 2, 3, 1)).all()
    # skip_bad_images: a record made garbage takes its batch neighbour's row and label
    bad = os.path.join(T, "bad.rfrec")
    with open(out, "rb") as f:
        data = bytearray(f.read())
    png0 = data.find(b"\x89PNG", 4096)
    data[png0 + 8:png0 + 40] = bytes(32)
    with open(bad, "wb") as f:
        f.write(data)
    try:
        for bx, by in ringflow.Loader(bad, 4, seed=3, image_size=16):
            pass
    except OSError as e:
        assert "bad.rfrec: record" in str(e), str(e)
    else:
        raise AssertionError("a corrupt image: no error")
    ld = ringflow.Loader(bad, 4, seed=3, image_size=16, dtype="uint8", skip_bad_images=True)
    xs, ys = [], []
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for bx, by in ld:
            xs.append(np.array(np.from_dlpack(bx)))
            ys.append(np.array(np.from_dlpack(by)))
    del bx, by
    # the library's warning, as Python's (it was dropped: no log callback was set)
    said = [w for w in said if issubclass(w.category, ringflow.Warning)]
    assert len(said) == 1 and "bad.rfrec: record" in str(said[0].message), \
        [str(w.message) for w in said]
    assert issubclass(ringflow.Warning, RuntimeWarning)
    with warnings.catch_warnings():   # a filter that makes it an error raises it
        warnings.simplefilter("error", ringflow.Warning)
        ld2 = ringflow.Loader(bad, 4, seed=3, image_size=16, skip_bad_images=True)
        b2, raised, rows = None, 0, []
        while True:   # ... before a batch is taken: going on loses none
            try:
                b2 = next(ld2)
            except ringflow.Warning as e:
                assert "bad.rfrec: record" in str(e), str(e)
                raised += 1
                continue
            except StopIteration:
                break
            rows.append(np.array(np.from_dlpack(b2[0])))
        assert raised == 1, raised
        xe = np.concatenate(rows)
        assert xe.shape[0] == n, (xe.shape, n)
        assert np.allclose(xe, np.concatenate(xs) / np.float32(255)), "error filter: rows"
        del b2
        ld2.close()
    st = ld.stats()
    ld.close()
    assert st["images_skipped"] == 1 and st["records"] == n, st
    xb = np.concatenate(xs)
    diff = [j for j in range(n) if not (xb[j] == xu[j]).all()]
    assert len(diff) == 1, diff
    j = diff[0]
    k = j - 1 if j % 4 else j + 1
    assert (xb[j] == xb[k]).all() and np.concatenate(ys)[j] == np.concatenate(ys)[k]
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
    print(f"ringflow python images: {n} images, 11 loaders ok")


if __name__ == "__main__":
    main()
