#!/usr/bin/env python3
"""check-house: the house rules of HACKING.md that a machine can check.

Usage: check-house.py SOURCE_ROOT [LIBRINGFLOW_SO]

1. layering: a library file includes its own module's headers, common/, and public
   headers of its own or a lower layer (common <- ring <- core <- devices <-
   comm <- dataloader <- train); a *-impl.h only from inside its module.
2. the library never writes to stderr or stdout itself.
3. no library .c/.cu file is above 800 lines, except those listed in LONG with a reason.
4. code is ASCII; library code cites nothing outside the repository, and the library's
   sources and installed headers (and python/ringflow) never send the reader to the
   project's private specification texts: "the seeds", "seeds'", "the seed's", "d2l",
   "section N", "chapter" or a section sign fail with FILE:LINE -- say what the code
   does instead. A public standard's section stays allowed ("RFC 9110 section 5.6.2").
   Tests, benches, tools, examples and *.md files are outside this rule.
5. with LIBRINGFLOW_SO: it exports only rf_ symbols, no rf__ internal.
6. generic code never names a backend: the device layer's own files (devices/*.c|h,
   backends.c, the registration, apart), the comm layer's (its transports and
   transports.c apart), the dataloader and train call the backends' tables and ask
   capabilities, and say neither cuda, cudnn, cublas, nccl nor openblas (nor mpi in
   comm/), in code or comments.
7. every libFuzzer harness fuzz/fuzz-NAME.c is built and run briefly by fuzz/meson.build,
   starts from a corpus fuzz/corpus/NAME that holds at least one input, and has a row in
   fuzz/README.md's table (tools/fuzz runs every harness file it finds).
"""
import os
import re
import subprocess
import sys

LAYERS = ["common", "ring", "core", "devices", "comm", "dataloader", "train"]
LIMIT = 800
# Files allowed above LIMIT, and why.
LONG = {}

root = sys.argv[1]
so = sys.argv[2] if len(sys.argv) > 2 else None
problems = []


def bad(msg):
    problems.append(msg)


def files(top, exts):
    for d, subdirs, names in os.walk(os.path.join(root, top)):
        subdirs[:] = [s for s in subdirs if not s.startswith("build")]
        for n in sorted(names):
            if n.endswith(exts):
                yield os.path.join(d, n)


def rel(p):
    return os.path.relpath(p, root)


# The public headers (include/ringflow/) and the layer each belongs to.
PUBLIC = {
    "log.h": "common", "rf-config.h": "common",
    "ring.h": "ring", "ring-io.h": "ring", "ring-ops.h": "ring",
    "engine.h": "core", "stream.h": "core",
    "device.h": "devices", "tensor.h": "devices", "ops.h": "devices",
    "comm.h": "comm",
    "dataset.h": "dataloader", "loader.h": "dataloader",
    "model.h": "train", "kvstore.h": "train", "trainer.h": "train", "checkpoint.h": "train", "export.h": "train",
}
public = {}
for p in files("include/ringflow", (".h",)):
    base = os.path.basename(p)
    if base not in PUBLIC:
        bad(f"{rel(p)}: a public header missing from PUBLIC in {rel(__file__)}: say its layer")
        continue
    public[base] = PUBLIC[base]
for base, lay in PUBLIC.items():
    public.setdefault(base, lay)

# 4. the project's private specification texts, by the words that point at them; an
# RFC's section is a public standard's and stays allowed
PRIVATE_TEXT = re.compile(r"(?i)\bthe seeds\b|\bseeds'|\bthe seed's\b|\bd2l\b|\u00a7"
                          r"|\bchapter\b|\bsection \d")
RFC_SECTION = re.compile(r"(?i)\bRFC \d+,? section \d")
def private_text(p, ln, line):
    m = PRIVATE_TEXT.search(RFC_SECTION.sub("", line))
    if m:
        bad(f"{rel(p)}:{ln}: refers the reader to a text outside the repository "
            f"('{m.group(0)}'): say what the code does instead: {line.strip()}")


inc_re = re.compile(r'^\s*#\s*include\s+[<"]([^">]+)[">]')
def layer_of(p):
    """The layer of a library file: its top directory, or a public header's layer."""
    top = rel(p).split(os.sep)[0]
    return public.get(os.path.basename(p), "common") if top == "include" else top


for p in [q for top in LAYERS + ["include"] for q in files(top, (".c", ".h", ".cu"))]:
    layer = layer_of(p)
    here = os.path.dirname(p)
    with open(p, encoding="utf-8", errors="replace") as f:
        text = f.read()
    for ln, line in enumerate(text.splitlines(), 1):
        m = inc_re.match(line)
        if not m:
            continue
        name = m.group(1)
        base = name.split("/")[-1]
        local = os.path.join(here, name)
        if name.startswith("ringflow/") or (base in public and (
                not os.path.exists(local) or rel(local).startswith("include"))):
            lay = public.get(base)
            if lay is None:
                bad(f"{rel(p)}:{ln}: includes {name}, which is no public header")
            elif LAYERS.index(lay) > LAYERS.index(layer):
                bad(f"{rel(p)}:{ln}: {layer} imports {name} from the higher layer {lay}")
            continue
        target = os.path.normpath(os.path.join(here, name))
        if os.path.exists(target):
            tl = rel(target).split(os.sep)[0]
            if tl != layer and tl != "common":
                bad(f"{rel(p)}:{ln}: includes {rel(target)}, internal to {tl}/")
    lines = text.count("\n")
    if p.endswith((".c", ".cu")) and lines > LIMIT and rel(p) not in LONG:
        bad(f"{rel(p)}: {lines} lines (the house limit is {LIMIT}: split it along a seam)")
    for ln, line in enumerate(text.splitlines(), 1):
        if re.search(r"\b(f?printf|fputs|fputc|perror|puts)\s*\(\s*(stderr|stdout)?", line) and \
           re.search(r"\b(stderr|stdout)\b|\bperror\s*\(|^\s*(puts|printf)\s*\(", line):
            bad(f"{rel(p)}:{ln}: the library writes to the terminal: {line.strip()}")
        if re.search(r"\.\./shared|seeds/|\bissue \d+", line):
            bad(f"{rel(p)}:{ln}: refers outside the repository: {line.strip()}")
        private_text(p, ln, line)

# 4. the Python package (its extension and modules) follows the same rule on outside texts
for p in files("python/ringflow", (".c", ".h", ".py")):
    with open(p, encoding="utf-8", errors="replace") as f:
        for ln, line in enumerate(f, 1):
            private_text(p, ln, line)

# 6. generic files never name a backend
BACKEND_NAMES = re.compile(r"(?i)(?<![a-z0-9])(cuda|cudnn|cublas|nccl|openblas|cblas)")
# the comm layer's generic files do not name its transports either
TRANSPORT_NAMES = re.compile(r"(?i)(?<![a-z0-9])(cuda|cudnn|cublas|nccl|openblas|cblas|mpi)")
REGISTRATION = {"devices/backends.c", "comm/transports.c"}
COMM_TRANSPORTS = {"mpi.c", "mpi-none.c", "nccl.c", "nccl-none.c"}
def generic_files():
    for p in sorted(os.listdir(os.path.join(root, "devices"))):
        if p.endswith((".c", ".h")) and f"devices/{p}" not in REGISTRATION:
            yield os.path.join(root, "devices", p), BACKEND_NAMES
    for p in sorted(os.listdir(os.path.join(root, "comm"))):
        if p.endswith((".c", ".h")) and f"comm/{p}" not in REGISTRATION and p not in COMM_TRANSPORTS:
            yield os.path.join(root, "comm", p), TRANSPORT_NAMES
    for top in ("dataloader", "train"):
        for p in files(top, (".c", ".h")):
            yield p, BACKEND_NAMES
for p, names in generic_files():
    with open(p, encoding="utf-8", errors="replace") as f:
        for ln, line in enumerate(f, 1):
            m = names.search(line)
            if m:
                bad(f"{rel(p)}:{ln}: generic code names the backend '{m.group(1)}' (ask the "
                    f"backend table or a capability instead): {line.strip()}")

for top in LAYERS + ["include", "tools", "tests", "bench", "examples"]:
    for p in files(top, (".c", ".h", ".cu")):
        with open(p, "rb") as f:
            for ln, line in enumerate(f, 1):
                if any(b > 0x7F for b in line):
                    bad(f"{rel(p)}:{ln}: non-ASCII character")
                    break

# 7. fuzz harnesses: built, seeded, documented
fz_meson = open(os.path.join(root, "fuzz/meson.build")).read()
fz_readme = open(os.path.join(root, "fuzz/README.md")).read()
fz_names = sorted(f[len("fuzz-"):-2] for f in os.listdir(os.path.join(root, "fuzz"))
                  if f.startswith("fuzz-") and f.endswith(".c"))
if not fz_names:
    bad("fuzz/: no harness fuzz-NAME.c found")
for n in fz_names:
    if f"'{n}': [files('fuzz-{n}.c'" not in fz_meson:
        bad(f"fuzz/fuzz-{n}.c: not in fuzz/meson.build's harnesses ('{n}': [files(...)])")
    cdir = os.path.join(root, "fuzz/corpus", n)
    if not os.path.isdir(cdir) or not os.listdir(cdir):
        bad(f"fuzz/fuzz-{n}.c: no corpus (fuzz/corpus/{n}/ missing or empty)")
    if f"| `fuzz-{n}` |" not in fz_readme:
        bad(f"fuzz/fuzz-{n}.c: no row in fuzz/README.md's table (| `fuzz-{n}` | ...)")

if so:
    out = subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True,
                         check=True).stdout
    if not out.strip():
        bad(f"{so}: exports nothing")
    for line in out.splitlines():
        sym = line.split()[-1]
        if not sym.startswith("rf_") or sym.startswith("rf__"):
            bad(f"{so}: exports {sym} (only rf_ API symbols may be exported)")

for p in problems:
    print(p)
print(f"{len(problems)} problem(s)" if problems else "house rules hold")
sys.exit(1 if problems else 0)
