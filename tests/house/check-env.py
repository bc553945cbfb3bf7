#!/usr/bin/env python3
"""check-env: the environment variables the code reads are the ones doc/embedding.md lists.

Usage: check-env.py SOURCE_ROOT

Fails (exit 1, one line per problem) when the library or an installed tool reads an
environment variable that the table of doc/embedding.md ("## Environment variables")
does not list, naming FILE:LINE and the variable; when the table lists a variable
nothing reads any more; and when a read's name cannot be told (getenv of a variable
or a macro that is no parameter of its function).

Scanned: ring core devices comm dataloader train common include python/ringflow tools,
without tools/dev (developer tools), build directories or hidden ones; C, C++ and CUDA
files, Python files (*.py, or a script whose first line names python). Not scanned:
tests/, bench/ (each benchmark script lists its variables in its header), examples/,
fuzz/.

A read is:
  - C: getenv("NAME") or secure_getenv("NAME"), comments left out;
  - C: a call of an env helper with "NAME" where the helper passes that parameter to
    getenv -- a getenv(p) whose argument p is a parameter of the function around it
    makes that function a helper (comm/store.c's rf__env_int("WORLD_SIZE", ...)), and a
    helper passing its own parameter on to another helper is one too;
  - Python: os.environ["NAME"], os.environ.get("NAME"), os.getenv("NAME"),
    "NAME" in os.environ;
  - shell (a script under tools/ whose first line names sh or bash): $RF_NAME or
    ${RF_NAME...} -- the project's own variables (a script's other names are its
    locals or the system's).
The table's rows are those whose first cell holds backticked names (`NAME`, or
`A`, `B` for a row that covers several); the header and group rows (bold, no
backticks) are skipped. Python standard library only.
"""
import os
import re
import sys

SCAN = ["ring", "core", "devices", "comm", "dataloader", "train", "common", "include",
        "python/ringflow", "tools"]
SKIP = {"tools/dev"}
DOC = "doc/embedding.md"
SECTION = re.compile(r"^##\s+Environment variables\s*$")
C_EXT = (".c", ".h", ".cu", ".cuh", ".cc", ".cpp", ".hpp")
NAME = r"[A-Za-z_][A-Za-z0-9_]*"

root = sys.argv[1] if len(sys.argv) > 1 else "."
problems = []


def rel(p):
    return os.path.relpath(p, root)


def sources():
    """(path, kind) of every scanned file: kind 'c' or 'py'."""
    for top in SCAN:
        for d, subdirs, names in os.walk(os.path.join(root, top)):
            subdirs[:] = sorted(s for s in subdirs if not s.startswith(("build", "."))
                                and rel(os.path.join(d, s)) not in SKIP)
            for n in sorted(names):
                p = os.path.join(d, n)
                if n.endswith(C_EXT):
                    yield p, "c"
                elif n.endswith(".py"):
                    yield p, "py"
                elif "." not in n and os.path.isfile(p):
                    with open(p, "rb") as f:
                        first = f.readline()
                    if first.startswith(b"#!") and b"python" in first:
                        yield p, "py"
                    elif first.startswith(b"#!") and re.search(rb"\b(ba)?sh\b", first):
                        yield p, "sh"


def strip_c_comments(text):
    """text with every comment blanked (newlines kept, so offsets and lines hold);
    string and character literals kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def call_args(text, open_paren):
    """The top-level arguments of the call whose '(' is at open_paren, stripped."""
    args, depth, start, i = [], 0, open_paren + 1, open_paren
    while i < len(text):
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < len(text) and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i].strip())
                return args
        elif c == "," and depth == 1:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    return args


LITERAL = re.compile(r'^"(' + NAME + r')"$')
# A function definition in the house style: its name and parameters, then the body's
# brace (kernel style: on its own line).
FUNC_DEF = re.compile(r"^(?!#|\s)[^;{}()=]*?\b(" + NAME + r")\s*\(([^;{}()]*(?:\([^;{}]*?\)"
                      r"[^;{}()]*)*)\)\s*\{", re.M)
NOT_DECL = {"return", "case", "sizeof", "else", "do"}


def line_of(text, off):
    return text.count("\n", 0, off) + 1


def params_of(plist):
    """The parameter names of a definition's parameter list, in order."""
    names = []
    for p in call_args("(" + plist + ")", 0):
        ids = re.findall(NAME, re.sub(r"\[[^\]]*\]", "", p))
        names.append(ids[-1] if ids else "")
    return names


def enclosing(defs, off):
    """(name, parameters) of the last function definition that starts before off."""
    best = None
    for m in defs:
        if m.start() < off:
            best = m
    return (best.group(1), params_of(best.group(2))) if best else (None, [])


def is_call(text, m):
    """A use of a function name at m is a call, not its definition or a prototype."""
    before = text[:m.start()].rstrip(" \t\n*")
    prev = re.search(NAME + r"$", before)
    return not (prev and prev.group(0) not in NOT_DECL)


files = list(sources())
ctext = {}
for p, kind in files:
    with open(p, encoding="utf-8", errors="replace") as f:
        raw = f.read()
    ctext[p] = strip_c_comments(raw) if kind == "c" else raw

reads = []          # (file, line, NAME)
helpers = {}        # function name -> set of parameter indices that reach getenv
work = []           # helpers still to look for callers of


def take_arg(p, text, off, arg, defs):
    """One argument that reaches getenv: a literal is a read; a parameter of the
    function around it makes that function a helper; anything else is unknown."""
    m = LITERAL.match(arg)
    if m:
        reads.append((p, line_of(text, off), m.group(1)))
        return
    fn, params = enclosing(defs, off)
    if re.fullmatch(NAME, arg) and fn and arg in params:
        idx = params.index(arg)
        if idx not in helpers.setdefault(fn, set()):
            helpers[fn].add(idx)
            work.append((fn, idx))
        return
    problems.append(f"{rel(p)}:{line_of(text, off)}: an environment read of '{arg}': "
                    "say the variable's name as a literal (or pass it through a "
                    "parameter), so that this check can find it in the table")


cdefs = {p: list(FUNC_DEF.finditer(ctext[p])) for p, kind in files if kind == "c"}
GETENV = re.compile(r"\b(?:secure_)?getenv\s*\(")
for p, kind in files:
    text = ctext[p]
    if kind == "c":
        for m in GETENV.finditer(text):
            args = call_args(text, m.end() - 1)
            take_arg(p, text, m.start(), args[0] if args else "", cdefs[p])
        continue
    if kind == "sh":
        for line_no, line in enumerate(text.splitlines(), 1):
            code = line if not line.lstrip().startswith("#") else ""
            for m in re.finditer(r"\$\{?(RF_[A-Z0-9_]+)", code):
                reads.append((p, line_no, m.group(1)))
        continue
    for line_no, line in enumerate(text.splitlines(), 1):
        code = re.sub(r"#.*", "", line)     # crude, enough for '#' in these files
        found = False
        for pat in (r"environ\s*\[\s*(['\"])(" + NAME + r")\1\s*\]",
                    r"environ\.(?:get|setdefault|pop)\s*\(\s*(['\"])(" + NAME + r")\1",
                    r"\bgetenv\s*\(\s*(['\"])(" + NAME + r")\1",
                    r"(['\"])(" + NAME + r")\1\s+(?:not\s+)?in\s+(?:os\.)?environ\b"):
            for m in re.finditer(pat, code):
                reads.append((p, line_no, m.group(2)))
                found = True
        if not found and re.search(r"environ\s*\[|environ\.(?:get|setdefault|pop)\s*\("
                                   r"|\bgetenv\s*\(", code):
            problems.append(f"{rel(p)}:{line_no}: an environment read this check cannot "
                            f"name: {line.strip()}")

while work:
    fn, idx = work.pop()
    call = re.compile(r"\b" + re.escape(fn) + r"\s*\(")
    for p, kind in files:
        if kind != "c":
            continue
        text = ctext[p]
        for m in call.finditer(text):
            if not is_call(text, m):
                continue
            args = call_args(text, m.end() - 1)
            if idx < len(args):
                take_arg(p, text, m.start(), args[idx], cdefs[p])

# The table.
doc_path = os.path.join(root, DOC)
listed = {}         # NAME -> line in DOC
with open(doc_path, encoding="utf-8") as f:
    lines = f.read().splitlines()
start = next((i for i, l in enumerate(lines) if SECTION.match(l)), None)
if start is None:
    problems.append(f"{DOC}: no '## Environment variables' section")
else:
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.startswith("## "):
            break
        if not line.lstrip().startswith("|"):
            continue
        first = line.strip().strip("|").split("|")[0].strip()
        names = re.findall(r"`([^`]*)`", first)
        if not names:
            continue        # the header, the rule, a group row
        rest = re.sub(r"`[^`]*`", "", first).replace(",", "").strip()
        if rest or not all(re.fullmatch(NAME, n) for n in names):
            problems.append(f"{DOC}:{i + 1}: a row's first cell should be backticked "
                            f"variable names only: {first}")
            continue
        for n in names:
            if n in listed:
                problems.append(f"{DOC}:{i + 1}: {n} is listed twice (also line {listed[n]})")
            listed[n] = i + 1
    if not listed:
        problems.append(f"{DOC}:{start + 1}: the section has no table of variables")

read_names = set()
for p, line_no, name in sorted(set(reads)):
    read_names.add(name)
    if listed and name not in listed:
        problems.append(f"{rel(p)}:{line_no}: reads the environment variable {name}, "
                        f"which the table in {DOC} (## Environment variables) lacks")
for name, line_no in sorted(listed.items(), key=lambda kv: kv[1]):
    if name not in read_names:
        problems.append(f"{DOC}:{line_no}: lists {name}, which nothing scanned reads any "
                        "more (remove the row, or say where it is read)")

for msg in problems:
    print(msg)
if problems:
    print(f"{len(problems)} problem(s)")
    sys.exit(1)
print(f"environment: {len(read_names)} variables read in {len(set((p, l) for p, l, _ in reads))} "
      f"places, all in {DOC}; helpers: {', '.join(sorted(helpers)) or 'none'}")
