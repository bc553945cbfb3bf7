#!/usr/bin/env python3
"""ckpt-runstate-v1.py FILE -- rewrite a checkpoint's run state (train/runstate.h) from
version 2 ("RFRS", a u16 version, a u16 count, then (u16 tag, u16 length 8, value)
fields) into version 1 (no header; field N at byte 8*(N-1) of extra, extra_len 144),
as rf-train wrote it before the run state was versioned, and make the header CRC and
the trailer (train/README.md, "File format, version 1") anew. In place."""
import struct
import sys
import zlib

V1_FIELDS = 18


def main(path):
    d = bytearray(open(path, "rb").read())
    if d[:8] != b"RFCKPTv1":
        sys.exit(f"{path}: not a ringflow checkpoint (magic {bytes(d[:8])!r})")
    ntensors = struct.unpack_from("<I", d, 24)[0]
    extra_len = struct.unpack_from("<I", d, 104)[0]
    extra = bytes(d[112:112 + extra_len])
    if extra[:4] != b"RFRS" or struct.unpack_from("<H", extra, 4)[0] not in (2, 3):
        sys.exit(f"{path}: run state is not version 2 or 3")
    count = struct.unpack_from("<H", extra, 6)[0]
    v1 = bytearray(8 * V1_FIELDS)
    o = 8
    for _ in range(count):
        tag, length = struct.unpack_from("<HH", extra, o)
        if length != 8 or tag < 1:
            sys.exit(f"{path}: field tag {tag} length {length} is not a run state field")
        if tag <= V1_FIELDS:    # later fields (19: --order) did not exist in version 1
            v1[8 * (tag - 1):8 * tag] = extra[o + 4:o + 12]
        o += 12
    d[104:108] = struct.pack("<I", len(v1))
    d[112:368] = bytes(v1) + bytes(256 - len(v1))
    hend = 384 + 128 * ntensors
    hcrc = zlib.crc32(bytes(d[:hend])) & 0xFFFFFFFF
    struct.pack_into("<I", d, hend, hcrc)
    t = len(d) - 32
    if d[t:t + 8] != b"RFCKEND1":
        sys.exit(f"{path}: no trailer at offset {t}")
    struct.pack_into("<I", d, t + 16, hcrc)
    struct.pack_into("<I", d, t + 28, zlib.crc32(bytes(d[t:t + 28])) & 0xFFFFFFFF)
    open(path, "wb").write(d)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
