#!/usr/bin/env python3
"""gen-man.py -- section 3 man pages for libringflow's public functions, generated from
the installed headers (include/ringflow/*.h), as liburing ships one page per function.

Each public function (rf_*, a prototype or a static inline definition) gets
OUTDIR/<name>.3: NAME, SYNOPSIS (the header's #include and the declaration),
DESCRIPTION (the comment written right above it in the header, or the comment above
a group of declarations that follow it without a blank line -- if that comment names
the function: a group's comment that names only its first would describe that one on
every page), the header's own opening comment as CONTEXT, and SEE ALSO (the other
functions of the header). A function without a comment of its own is an error: the
page would say nothing, or something else's.

usage: gen-man.py [--check-exports LIB.so] OUTDIR HEADER...
  --check-exports: also fail if the shared library exports an rf_ function that no
  header declares (it would have no page).
Exit 0, or 1 with every problem listed."""
import os
import re
import subprocess
import sys

PROTO = re.compile(r"^(?:static\s+inline\s+)?(?:const\s+)?(?:struct\s+|enum\s+|unsigned\s+)?"
                   r"[A-Za-z_][\w]*[\s\*]+(?:const[\s\*]+)*\**(rf_[a-z0-9_]+)\s*\(")


def parse(path):
    """[(name, declaration, comment)] in file order, and the header's opening comment."""
    lines = open(path).read().split("\n")
    out = []
    head = ""
    m = re.match(r"/\*(.*?)\*/", "\n".join(lines), re.S)
    if m:
        head = strip_block(m.group(1))
    i = 0
    depth = 0  # inside a struct/enum body or an inline function's body
    while i < len(lines):
        line = lines[i]
        mm = PROTO.match(line) if depth == 0 else None
        if mm and not line.lstrip().startswith(("typedef", "#")):
            name = mm.group(1)
            # the declaration: up to ';' or '{'
            j, decl = i, []
            while True:
                decl.append(lines[j].rstrip())
                if ";" in lines[j] or "{" in lines[j]:
                    break
                j += 1
            text = "\n".join(decl)
            text = text.split("{")[0].rstrip() + (";" if "{" in text else "")
            text = text.replace("static inline ", "")
            comment = comment_above(lines, i)
            direct = i > 0 and lines[i - 1].rstrip().endswith("*/")
            if not direct and not re.search(r"\b%s\b" % re.escape(name), comment):
                comment = ""  # a group's comment that does not name it: not its own
            out.append((name, text, comment))
            if "{" in lines[j] and "}" not in lines[j]:
                depth += lines[j].count("{") - lines[j].count("}")
            i = j + 1
            continue
        cpp = 'extern "C"' in line or (line.strip() == "}" and i > 0 and
                                         lines[i - 1].startswith("#ifdef __cplusplus"))
        if not cpp:
            depth += line.count("{") - line.count("}")
        if depth < 0:
            depth = 0
        i += 1
    return out, head


def is_decl_line(l):
    s = l.strip()
    return bool(s) and not s.startswith(("/*", "*", "//", "#")) and not s.endswith("*/")


def comment_above(lines, i):
    """The comment block right above line i, skipping the declarations of the same
    group (no blank line between them). Trailing comments on the declaration's own
    lines count too."""
    k = i - 1
    while k >= 0 and is_decl_line(lines[k]):
        k -= 1
    if k < 0 or not lines[k].rstrip().endswith("*/"):
        return ""
    end = k
    while k >= 0 and "/*" not in lines[k]:
        k -= 1
    if k < 0:
        return ""
    block = "\n".join(lines[k:end + 1])
    return strip_block(block[block.index("/*") + 2:block.rindex("*/")])


def strip_block(block):
    """A comment's text without its leading " * " columns."""
    return "\n".join(l.strip().lstrip("*").strip() if l.strip().startswith("*") else l.strip()
                     for l in block.split("\n")).strip()


def esc(s):
    return s.replace("\\", "\\e").replace("\n.", "\n\\&.").replace("\n'", "\n\\&'")


def page(name, header, decl, comment, head, others):
    hdr = os.path.basename(header)
    t = ['.TH %s 3 "" "ringflow" "ringflow manual"' % name.upper(),
         ".SH NAME", "%s \\- %s" % (name, esc(first_sentence(comment))),
         ".SH SYNOPSIS", ".nf", ".B #include <ringflow/%s>" % hdr, ".PP", esc(decl), ".fi",
         ".SH DESCRIPTION", esc(comment),
         ".SH CONTEXT", "From the opening of", ".IR ringflow/%s :" % hdr, ".PP", esc(head.strip())]
    if others:
        t += [".SH SEE ALSO", ", ".join("\\fB%s\\fP(3)" % o for o in others)]
    return "\n".join(t) + "\n"


def first_sentence(c):
    """The NAME line: the comment's first sentence, ended by a '.', ';' or ':' outside
    parentheses and quotes (not an ellipsis's or an abbreviation's dot, nor a one- or
    two-word label's colon); past 100 characters cut at a word, with an ellipsis."""
    lines = c.split("\n")
    if lines and lines[0].lstrip().startswith("----"):   # a section's divider: not a summary
        rest = "\n".join(lines[1:]).strip()
        if rest:
            c = rest
    s = " ".join(c.split())
    depth, q, end = 0, False, len(s)
    for k, ch in enumerate(s):
        if ch == '"' or ch == "`":
            q = not q
        elif q:
            continue
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch in ".;:" and depth == 0 and (k + 1 == len(s) or s[k + 1] == " "):
            words = s[:k].split()
            if ch == "." and (k > 0 and s[k - 1] == "." or
                              words and words[-1].lower() in ("e.g", "i.e", "etc", "vs")):
                continue          # an ellipsis, an abbreviation
            if ch == ":" and len(words) < 3:
                continue          # a label ("datasync: 1 for ..."), not a sentence
            end = k
            break
    s = s[:end]
    if len(s) > 100:
        s = s[:100].rsplit(" ", 1)[0] + "..."
    return s


def main(argv):
    exports = None
    if argv and argv[0] == "--check-exports":
        exports = argv[1]
        argv = argv[2:]
    outdir, headers = argv[0], argv[1:]
    os.makedirs(outdir, exist_ok=True)
    problems, declared = [], set()
    for h in headers:
        funcs, head = parse(h)
        names = [f[0] for f in funcs]
        for name, decl, comment in funcs:
            if name in declared:
                continue
            declared.add(name)
            if not comment:
                problems.append("%s: %s has no comment of its own above it (or a group "
                                "comment that names it)" % (os.path.basename(h), name))
                continue
            others = [n for n in names if n != name][:40]
            with open(os.path.join(outdir, name + ".3"), "w") as f:
                f.write(page(name, h, decl, comment, head, others))
    if exports:
        nm = subprocess.run(["nm", "-D", "--defined-only", exports], capture_output=True,
                            text=True, check=True).stdout
        exp = {l.split()[-1] for l in nm.splitlines() if re.search(r" T rf_[a-z0-9_]+$", l)}
        for e in sorted(exp - declared):
            problems.append("%s exports %s, which no installed header declares" %
                            (os.path.basename(exports), e))
    for p in problems:
        print("gen-man: " + p, file=sys.stderr)
    print("gen-man: %d pages in %s" % (len(declared) - len([p for p in problems if "no comment" in p]),
                                       outdir))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
