#!/usr/bin/env python3
"""The documentation still matches the tree and the programs (meson test docs-links).

    check-docs.py SOURCE_ROOT BUILD_ROOT

Checks, in README.md, doc/*.md, HACKING.md and every README.md below the source root
(build directories, hidden directories and nested repositories left out):

 1. Every relative Markdown link -- [text](path), [text](path#anchor), [text](#anchor),
    ![alt](path), [label]: path -- resolves to an existing file or directory relative
    to the file that holds it; an #anchor into a .md file names a heading there by its
    GitHub slug (lowercase, punctuation but '-' and '_' dropped, spaces made '-',
    '-1', '-2' ... on repeats) or an <a id|name="..."> in it.
 2. Every command in a fenced block (```sh, ```bash, ```shell or untyped) that runs
    one of the project's programs -- build/tools/rf-train, rf-iobench, rf-pack,
    rf-infer, build/bench/rf-bench, the same name under an installed .../bin/, or
    the bare name -- and every inline code span that begins with one (`rf-bench
    engine --n 1000`, `mpirun -np 2 build/bench/rf-bench allreduce`) names only long
    options that program's --help lists (--help itself always passes). The program
    must exist in BUILD_ROOT and `PROG --help` exit 0. Where the help's usage line
    says COMMAND (rf-bench), the command's first word is its subcommand: its options
    are checked against `PROG SUB --help` when that exits 0, else only that SUB
    appears in the top-level help. Leading env assignments, mpirun and its options,
    comments, line continuations and `&&`/`;`/` | ` chains are handled (`a|b` with
    no spaces is read as alternatives, not a pipe); placeholders (CAPITALS, ...) do
    not exempt a command from the check.
 3. README.md has at most 160 lines and begins with the fenced two-command block
    (```sh, two `tools/install-deps && ...` lines, ```); every doc/*.md begins with a
    one-line `# Title` and links back to ../README.md within its first three lines.

Prints one line per problem (FILE:LINE: what) and exits 1, or exits 0 with
"docs: N links, M commands checked". A program missing from BUILD_ROOT is reported
as skipped (its commands unchecked), not as a failure. Python standard library only.
"""
import os
import re
import subprocess
import sys
import urllib.parse

PROGRAMS = {  # the name in a doc command -> its path under the build root
    'rf-train': 'tools/rf-train',
    'rf-iobench': 'tools/rf-iobench',
    'rf-pack': 'tools/rf-pack',
    'rf-infer': 'tools/rf-infer',
    'rf-bench': 'bench/rf-bench',
}
# build/tools/rf-train, ./build/bench/rf-bench, /opt/ringflow/bin/rf-train, rf-train
PROG_RE = re.compile(r'^(?:\./)?(?:build/(?:tools|bench)/|\S*/bin/)?(rf-[a-z]+)$')
# an inline code span that is a command: env assignments, /usr/bin/time or mpirun
# with its options, then one of the programs
SPAN_CMD_RE = re.compile(r'^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*'
                         r'(?:/usr/bin/time(?:\s+-v)?\s+|mpirun(?:\s+-\S+(?:\s+[^-\s]\S*)?)*\s+)?'
                         r'(?:\./)?(?:build/(?:tools|bench)/|\S*/bin/)?(rf-[a-z]+)(?:\s|$)')
SHELL_LANGS = {'', 'sh', 'bash', 'shell'}
README_MAX_LINES = 160

problems = []


def problem(path, line, what):
    problems.append(f'{path}:{line}: {what}')


def is_build_dir(path):
    return any(os.path.exists(os.path.join(path, m))
               for m in ('meson-private', 'build.ninja', 'meson-info'))


def doc_files(src, build):
    """README.md, doc/*.md, HACKING.md, then every README.md below src."""
    out = []
    for rel in ('README.md', 'HACKING.md'):
        if os.path.isfile(os.path.join(src, rel)):
            out.append(rel)
    docdir = os.path.join(src, 'doc')
    if os.path.isdir(docdir):
        out += sorted('doc/' + f for f in os.listdir(docdir) if f.endswith('.md'))
    build_real = os.path.realpath(build)
    for root, dirs, files in os.walk(src):
        keep = []
        for d in sorted(dirs):
            full = os.path.join(root, d)
            if (d.startswith('.') or d == '__pycache__' or os.path.islink(full)
                    or os.path.realpath(full) == build_real or is_build_dir(full)
                    or os.path.exists(os.path.join(full, '.git'))):
                continue
            keep.append(d)
        dirs[:] = keep
        if 'README.md' in files and root != src:
            out.append(os.path.relpath(os.path.join(root, 'README.md'), src))
    return out


def read_lines(path):
    with open(path, encoding='utf-8') as f:
        return f.read().split('\n')


def fences(lines):
    """Yields (index, line, lang) for every line: lang is None outside a fenced block,
    the block's info word inside it (the fence lines themselves count as outside)."""
    fence = None
    lang = None
    for i, line in enumerate(lines):
        m = re.match(r'^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)', line)
        if fence is None and m:
            fence, lang = m.group(1), m.group(2).lower()
            yield i, line, None
        elif fence is not None and re.match(r'^ {0,3}' + re.escape(fence[0]) + '{%d,}\\s*$'
                                            % len(fence), line):
            fence = None
            yield i, line, None
        else:
            yield i, line, (lang if fence is not None else None)


def slugify(text):
    """GitHub's heading anchor: the rendered text, lowercased, everything but word
    characters, '-' and ' ' dropped, spaces made '-'."""
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)   # links and images: their text
    text = re.sub(r'<[^>]+>', '', text)                        # inline HTML tags
    text = text.strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def anchors(lines):
    seen = {}
    out = set()
    prev = None
    for i, line, lang in fences(lines):
        if lang is not None:
            prev = None
            continue
        for m in re.finditer(r'<a\s+(?:id|name)="([^"]+)"', line):
            out.add(m.group(1))
        text = None
        m = re.match(r'^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$', line)
        if m:
            text = m.group(2)
        elif prev and prev.strip() and re.match(r'^ {0,3}(=+|-+)\s*$', line) \
                and not re.match(r'^ {0,3}([-*+]|\d+\.)\s', prev) and '|' not in prev:
            text = prev
        prev = line
        if text is None:
            continue
        slug = slugify(text)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f'{slug}-{n}')
    return out


_anchor_cache = {}


def anchors_of(path):
    if path not in _anchor_cache:
        _anchor_cache[path] = anchors(read_lines(path))
    return _anchor_cache[path]


def strip_code_spans(text):
    """Blanks inline code spans (which may wrap), keeping every offset and newline."""
    return re.sub(r'(`+)(?:(?!\1).)+?\1', lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text,
                  flags=re.S)


LINK_RE = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
REF_RE = re.compile(r'^ {0,3}\[[^\]]+\]:[ \t]*<?(\S+?)>?(?:[ \t]+"[^"\n]*")?[ \t]*$', re.M)


def paragraphs(lines):
    """Yields (first line index, text) for each run of non-blank lines outside fenced
    blocks, so that a link whose text wraps is still one link."""
    start, buf = None, []
    for i, line, lang in fences(lines):
        if lang is None and line.strip() and not re.match(r'^ {0,3}(`{3,}|~{3,})', line):
            if start is None:
                start = i
            buf.append(line)
            continue
        if buf:
            yield start, '\n'.join(buf)
        start, buf = None, []
    if buf:
        yield start, '\n'.join(buf)


def check_links(src, rel, lines):
    n = 0
    here = os.path.dirname(os.path.join(src, rel))
    for first, para in paragraphs(lines):
        text = strip_code_spans(para)
        found = [(m.start(), m.group(1)) for m in LINK_RE.finditer(text)]
        found += [(m.start(), m.group(1)) for m in REF_RE.finditer(text)]
        for pos, target in found:
            i = first + text.count('\n', 0, pos)
            if (not target or re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', target)
                    or target.startswith('//')):
                continue  # http:, https:, mailto: ...
            n += 1
            path, _, anchor = target.partition('#')
            path = urllib.parse.unquote(path)
            if path == '':
                full = os.path.join(src, rel)
            elif path.startswith('/'):
                full = os.path.join(src, path.lstrip('/'))
            else:
                full = os.path.normpath(os.path.join(here, path))
            if not os.path.exists(full):
                problem(rel, i + 1,
                        f'link to {target}: {os.path.relpath(full, src)} does not exist')
                continue
            if anchor and full.endswith('.md') and os.path.isfile(full):
                if urllib.parse.unquote(anchor) not in anchors_of(full):
                    problem(rel, i + 1, f'link to {target}: no heading with the anchor '
                            f'#{anchor} in {os.path.relpath(full, src)}')
    return n


def shell_commands(lines):
    """Yields (line number, command) for the commands of shell fenced blocks, with
    continuation lines joined, comments dropped and a leading '$ ' prompt removed."""
    pending, start = '', 0
    for i, line, lang in fences(lines):
        if lang is None or lang not in SHELL_LANGS:
            if pending:
                yield start, pending
            pending = ''
            continue
        if not pending:
            start = i + 1
            line = re.sub(r'^\s*\$\s+', '', line)
        line = re.sub(r'(^|\s)#.*$', '', line)
        if line.rstrip().endswith('\\'):
            pending += line.rstrip()[:-1] + ' '
            continue
        pending += line
        if pending.strip():
            yield start, pending
        pending = ''
    if pending:
        yield start, pending


_help_cache = {}


def run_help(build, prog, sub=None):
    key = (prog, sub)
    if key not in _help_cache:
        argv = [os.path.join(build, PROGRAMS[prog])] + ([sub] if sub else []) + ['--help']
        try:
            p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
            _help_cache[key] = (p.returncode, p.stdout.decode('utf-8', 'replace'))
        except (OSError, subprocess.TimeoutExpired) as e:
            _help_cache[key] = (-1, str(e))
    return _help_cache[key]


def has_option(help_text, opt):
    return re.search(re.escape(opt) + r'(?![\w-])', help_text) is not None


def check_command(build, rel, lineno, cmd, missing):
    """Checks every program invocation in one command line; returns how many."""
    n = 0
    cmd = cmd.replace('2>&1', ' ').replace('&>', ' >').replace('>&', '> ')
    for seg in re.split(r'&&|\|\||;|\s\|\s|&(?=\s|$)|[()]', cmd):
        words = seg.split()
        for k, w in enumerate(words):
            m = PROG_RE.match(w)
            if m and m.group(1) in PROGRAMS:
                break
        else:
            continue
        prog = m.group(1)
        args = words[k + 1:]
        if not os.path.isfile(os.path.join(build, PROGRAMS[prog])):
            missing.setdefault(prog, 0)
            missing[prog] += 1
            continue
        n += 1
        rc, top = run_help(build, prog)
        if rc != 0:
            problem(rel, lineno, f'{prog} --help exits {rc}')
            continue
        help_text, what = top, f'{prog} --help'
        usage = next((l for l in top.splitlines() if l.lower().startswith('usage:')), '')
        if re.search(r'\bCOMMAND\b|<command>', usage) and args and not args[0].startswith('-'):
            sub = args[0]
            if not re.search(r'^\s*' + re.escape(sub) + r'\b', top, re.M):
                problem(rel, lineno, f'{prog} has no subcommand {sub!r} (not in {prog} --help)')
                continue
            src, sub_help = run_help(build, prog, sub)
            if src != 0:
                continue  # only the name can be checked
            help_text, what = sub_help, f'{prog} {sub} --help'
        for a in args:
            if not re.match(r'^--[A-Za-z0-9]', a):
                continue
            opt = a.split('=', 1)[0]
            if opt != '--help' and not has_option(help_text, opt):
                problem(rel, lineno, f'{prog}: option {opt} is not in `{what}`')
    return n


def span_commands(lines):
    """Yields (line number, command) for inline code spans, outside fenced blocks,
    that begin with a command running one of the programs."""
    for i, line, lang in fences(lines):
        if lang is not None:
            continue
        for m in re.finditer(r'(`+)((?:(?!\1).)+?)\1', line):
            text = m.group(2).strip()
            p = SPAN_CMD_RE.match(text)
            if p and p.group(1) in PROGRAMS:
                yield i + 1, text


def check_layout(src):
    path = os.path.join(src, 'README.md')
    if not os.path.isfile(path):
        problem('README.md', 1, 'missing')
        return
    lines = read_lines(path)
    count = len(lines) - (1 if lines and lines[-1] == '' else 0)
    if count > README_MAX_LINES:
        problem('README.md', count, f'{count} lines, at most {README_MAX_LINES} '
                '(the rest belongs in doc/)')
    head = lines[:4] + [''] * 4
    if not (head[0] == '```sh' and head[3] == '```'
            and all(h.startswith('tools/install-deps && ') for h in head[1:3])):
        problem('README.md', 1, 'does not begin with the two-command block '
                '(```sh, two "tools/install-deps && ..." lines, ```)')
    docdir = os.path.join(src, 'doc')
    for f in sorted(os.listdir(docdir)) if os.path.isdir(docdir) else []:
        if not f.endswith('.md'):
            continue
        lines = read_lines(os.path.join(docdir, f))
        if not re.match(r'^# \S', lines[0]):
            problem('doc/' + f, 1, 'does not begin with a one-line "# Title"')
        if not any('](../README.md' in l for l in lines[1:4]):
            problem('doc/' + f, 2, 'no link back to ../README.md in its first three lines')


def main():
    if len(sys.argv) != 3:
        print(__doc__.split('\n\n')[1], file=sys.stderr)
        return 2
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    nlinks = ncmds = 0
    missing = {}
    for rel in doc_files(src, build):
        lines = read_lines(os.path.join(src, rel))
        nlinks += check_links(src, rel, lines)
        for lineno, cmd in list(shell_commands(lines)) + list(span_commands(lines)):
            ncmds += check_command(build, rel, lineno, cmd, missing)
    check_layout(src)
    for prog, count in sorted(missing.items()):
        print(f'skipped: {os.path.join(build, PROGRAMS[prog])} is not built: '
              f'{count} command(s) naming {prog} not checked')
    for p in problems:
        print(p)
    if problems:
        print(f'docs: {len(problems)} problem(s) in {nlinks} links, {ncmds} commands')
        return 1
    print(f'docs: {nlinks} links, {ncmds} commands checked')
    return 0


if __name__ == '__main__':
    sys.exit(main())
