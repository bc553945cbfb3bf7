#!/usr/bin/python3
"""rf-export-torch: an independent reader of ringflow's exports (rf-train --export DIR).

Reads DIR/model.json (the layer graph) and DIR/params.rfck (checking its magic, header
CRC, trailer and every tensor's CRC, and the parameters' FNV-1a 64 against model.json),
builds the network in PyTorch from the JSON alone -- no ringflow code -- and evaluates
the Fashion-MNIST test set (IDX files, raw or .gz; pixels / 255, as rf-train feeds them).

Usage: rf-export-torch.py DIR [--data DIR] [--limit N] [--json]
Prints the accuracy and mean loss (one JSON object with --json). Exit 1 with one line
on stderr for a file that is not a well-formed export; 77 if PyTorch is missing.
Needs Debian's python3-torch (run with /usr/bin/python3).
"""
import gzip
import json
import math
import os
import stat
import struct
import sys
import zlib

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # the tests skip then
    print(f"rf-export-torch: PyTorch is missing ({e}): apt-get install python3-torch",
          file=sys.stderr)
    sys.exit(77)


def fail(msg):
    print(f"rf-export-torch: {msg}", file=sys.stderr)
    sys.exit(1)


def read_file(path, limit):
    """path's bytes: a regular file (a FIFO or a device would block or never end) of at
    most limit bytes, read as it was when opened."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            fail(f"{path}: not a regular file")
        if st.st_size > limit:
            fail(f"{path}: {st.st_size} bytes, expected at most {limit}")
        try:
            return f.read(st.st_size)
        except OSError as e:
            fail(f"{path}: {e.strerror}")


def no_duplicates(pairs):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {dup!r} twice in one object")
    return d


def read_rfck(path, model_name):
    """The tensors of a ringflow checkpoint file (train/README.md, "File format")."""
    blob = read_file(path, 1 << 32)
    if len(blob) < 384 + 8 + 32 or blob[:8] != b"RFCKPTv1":
        fail(f"{path}: not a ringflow checkpoint (magic RFCKPTv1)")
    version, header_size, file_size, n = struct.unpack_from("<IIQI", blob, 8)
    if version != 1 or file_size != len(blob) or header_size != 384 + 128 * n + 8:
        fail(f"{path}: version {version}, header size {header_size} or file size "
             f"{file_size} (the file has {len(blob)} bytes) is not what the format says")
    (hcrc,) = struct.unpack_from("<I", blob, 384 + 128 * n)
    if zlib.crc32(blob[:384 + 128 * n]) != hcrc:
        fail(f"{path}: the header's CRC does not match")
    if blob[32:64].split(b"\0", 1)[0].decode(errors="replace") != model_name:
        fail(f"{path}: a checkpoint of another model than model.json's {model_name!r}")
    trailer = blob[-32:]
    if trailer[:8] != b"RFCKEND1" or zlib.crc32(trailer[:28]) != struct.unpack_from("<I", trailer, 28)[0]:
        fail(f"{path}: no commit marker (RFCKEND1) at the end: a torn or truncated file")
    out = {}
    for i in range(n):
        e = 384 + 128 * i
        name = blob[e:e + 64].split(b"\0", 1)[0].decode()
        dtype, ndim = struct.unpack_from("<II", blob, e + 64)
        shape = struct.unpack_from("<4Q", blob, e + 72)[:ndim]
        off, nbytes, crc = struct.unpack_from("<QQI", blob, e + 104)
        data = blob[off:off + nbytes]
        if dtype != 0x0D or len(data) != nbytes or zlib.crc32(data) != crc:
            fail(f"{path}: tensor {name}: not f32 data of {nbytes} bytes with its CRC")
        out[name] = np.frombuffer(data, dtype="<f4").reshape(shape).copy()
    return out


def fnv1a64(arrays):
    h = 0xcbf29ce484222325
    for a in arrays:
        for b in a.astype("<f4").tobytes():
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def forward(model, T, x):
    """Run the layer graph of model.json: node 0 the input, node i+1 layer i's output."""
    bn = model.get("batchnorm", {})
    eps = bn.get("eps", 1e-5)
    nodes = [x]
    for i, l in enumerate(model["layers"]):
        src = nodes[l["in"]]
        p = [T[n] for n in l["params"]]
        k, kind = l["kind"], l["kind"]
        if kind == "dense":
            y = F.linear(src, p[0], p[1] if l["bias"] else None)
        elif kind == "conv":
            y = F.conv2d(src, p[0], p[1] if l["bias"] else None, stride=l["stride"],
                         padding=l["pad"])
        elif kind == "batchnorm":
            rm, rv = (T[n] for n in l["buffers"])
            y = F.batch_norm(src, rm, rv, p[0], p[1], training=False, eps=eps)
        elif kind == "relu":
            y = F.relu(src)
        elif kind == "avgpool":
            y = F.avg_pool2d(src, l["k"], stride=l["stride"])
        elif kind == "maxpool":
            y = F.max_pool2d(src, l["k"], stride=l["stride"])
        elif kind == "gap":
            y = src.mean(dim=(2, 3))
        elif kind == "add":
            y = src + nodes[l["in2"]]
        elif kind == "flatten":
            y = src.reshape(src.shape[0], -1)
        else:
            fail(f"layers[{i}]: unknown kind {kind!r}")
        want = tuple(l["output"])
        if tuple(y.shape[1:]) != want:
            fail(f"layers[{i}] ({kind}): output {tuple(y.shape[1:])}, model.json says {want}")
        nodes.append(y)
    return nodes[-1]


def idx(path):
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack_from(f">{ndim}I", data, 4)
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(d, name):
    for p in (os.path.join(d, name), os.path.join(d, name + ".gz")):
        if os.path.exists(p):
            return p
    fail(f"{d}: no {name} (or .gz): expected the Fashion-MNIST IDX files")


def main(argv):
    args = argv[1:]
    if not args or args[0].startswith("-"):
        fail("usage: rf-export-torch.py DIR [--data DIR] [--limit N] [--json]")
    d, data, limit, as_json = args[0], "/usr/share/datasets/fashion-mnist", 0, False
    i = 1
    while i < len(args):
        if args[i] == "--data" and i + 1 < len(args):
            data, i = args[i + 1], i + 2
        elif args[i] == "--limit" and i + 1 < len(args):
            limit, i = int(args[i + 1]), i + 2
        elif args[i] == "--json":
            as_json, i = True, i + 1
        else:
            fail(f"unknown argument {args[i]!r}")
    jpath = os.path.join(d, "model.json")
    try:
        model = json.loads(read_file(jpath, 1 << 24), object_pairs_hook=no_duplicates)
    except ValueError as e:
        fail(f"{jpath}: {e}")
    if not isinstance(model, dict):
        fail(f"{jpath}: expected a JSON object")
    if model.get("format") != "ringflow-export" or type(model.get("version")) is not int \
            or model["version"] != 1:
        fail(f"{jpath}: not a ringflow export of version 1")
    # what ringflow's own reader insists on (train/export.c): the parameters beside
    # model.json under their one name, and inputs scaled by a positive finite factor
    if model.get("params_file") != "params.rfck":
        fail(f"{jpath}: params_file {model.get('params_file')!r}, expected 'params.rfck'")
    sc = model.get("input_scale")
    if type(sc) not in (int, float) or not (math.isfinite(sc) and sc > 0):
        fail(f"{jpath}: input_scale {sc!r}, expected a positive finite number")
    if not isinstance(model.get("input"), list) or not model["input"] or \
            any(type(v) is not int or not 1 <= v <= 1 << 20 for v in model["input"]):
        fail(f"{jpath}: input {model.get('input')!r}, expected a shape of positive sizes")
    if not isinstance(model.get("layers"), list) or not model["layers"]:
        fail(f"{jpath}: layers {model.get('layers')!r}, expected a non-empty list")
    arrays = read_rfck(os.path.join(d, "params.rfck"), model["model"])
    for t in model["tensors"] + model["buffers"]:
        if t["name"] not in arrays or tuple(arrays[t["name"]].shape) != tuple(t["shape"]):
            fail(f"{d}/{model['params_file']}: tensor {t['name']} missing or not of shape {t['shape']}")
    h = fnv1a64(arrays[t["name"]] for t in model["tensors"])
    if f"{h:016x}" != model["params_fnv1a64"]:
        fail(f"{d}/{model['params_file']}: parameters hash to {h:016x}, model.json names "
             f"{model['params_fnv1a64']}")
    T = {k: torch.from_numpy(v) for k, v in arrays.items()}
    xs = idx(find(data, "t10k-images-idx3-ubyte"))
    ys = idx(find(data, "t10k-labels-idx1-ubyte"))
    if limit:
        xs, ys = xs[:limit], ys[:limit]
    correct, loss_sum = 0, 0.0
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    with torch.no_grad():
        for s in range(0, len(xs), 500):
            x = torch.from_numpy(xs[s:s + 500].astype(np.float32) * np.float32(model["input_scale"]))
            x = x.reshape(-1, *model["input"])
            if "input_mean" in model:   # x = (u8 * input_scale - mean[c]) / std[c]
                m = torch.tensor(model["input_mean"], dtype=torch.float32).view(1, -1, 1, 1)
                sd = torch.tensor(model["input_std"], dtype=torch.float32).view(1, -1, 1, 1)
                x = (x - m) / sd
            y = torch.from_numpy(ys[s:s + 500].astype(np.int64))
            logits = forward(model, T, x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(1) == y).sum().item()
    n = len(xs)
    if as_json:
        print(json.dumps({"model": model["model"], "samples": n, "accuracy": correct / n,
                          "loss": loss_sum / n}))
    else:
        print(f"rf-export-torch: {model['model']} from {d} in PyTorch {torch.__version__}: "
              f"accuracy {correct / n:.4f}, loss {loss_sum / n:.4f}, {n} samples")


def run(argv):
    """main(argv), a malformed export's Python error said as one line (exit 1): the
    program, and a test that reads many exports in one interpreter."""
    try:
        main(argv)
    except Exception as e:   # noqa: BLE001 -- any malformed field: one line, exit 1
        msg = str(e).splitlines()[0][:300] if str(e) else ""
        fail(f"{argv[1] if len(argv) > 1 else '?'}: not a well-formed export "
             f"({type(e).__name__}: {msg})")


if __name__ == "__main__":
    run(sys.argv)
