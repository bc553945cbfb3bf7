#!/bin/sh
# test-embed: another program can embed the reactor and engine from an installed
# ringflow, whose surface is the public one (headers that compile alone, --cflags that
# name ringflow's directory only). `meson install` into a scratch DESTDIR, then `pkg-config --cflags --libs
# ringflow` (with the prefix pointed into that DESTDIR) must be enough to
# compile examples/rf-manifest.c outside the tree, and the result must run and agree
# with sha256sum. The same with `pkg-config --static` and libringflow.a.
set -eu
build=$1
src=$2
command -v pkg-config >/dev/null || exit 77
command -v cc >/dev/null || exit 77
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
meson install -C "$build" --no-rebuild --quiet --destdir "$d/root" >/dev/null
pc=$(find "$d/root" -name ringflow.pc | head -n 1)
test -n "$pc" || { echo "ringflow.pc was not installed" >&2; exit 1; }
pcdir=$(dirname "$pc")
for h in ring.h engine.h; do
	test -n "$(find "$d/root" -path "*/include/ringflow/$h")" || { echo "missing installed header $h" >&2; exit 1; }
done
prefix=$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"][0])')
flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$d/root$prefix" --cflags --libs ringflow)
echo "pkg-config: $flags"

# The installed surface is the public one: --cflags names ringflow's include directory
# and nothing else (no backend's, no MPI's), with or without --static, and every
# installed header compiles alone with only that directory, as C and as C++.
inc=$(find "$d/root" -type d -path '*/include/ringflow' | head -n 1)
inc=$(dirname "$inc")
for st in "" --static; do
	cflags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$d/root$prefix" $st --cflags ringflow)
	for f in $cflags; do
		[ "$f" = "-I$inc" ] || { echo "pkg-config $st --cflags names more than $inc: $cflags" >&2; exit 1; }
	done
done
nh=0
for h in "$inc"/ringflow/*.h; do
	name=ringflow/$(basename "$h")
	printf '#include <%s>\n#include <%s>\n' "$name" "$name" > "$d/one.c"
	cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$d/one.c" ||
		{ echo "$name does not compile alone (C, -I$inc only)" >&2; exit 1; }
	if command -v c++ >/dev/null; then
		cp "$d/one.c" "$d/one.cc"
		c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$inc" "$d/one.cc" ||
			{ echo "$name does not compile alone (C++, -I$inc only)" >&2; exit 1; }
	fi
	nh=$((nh + 1))
done
[ -e "$inc/ringflow/kernels.h" ] && { echo "kernels.h is installed: the CPU kernels are private" >&2; exit 1; }
echo "$nh installed headers compile alone with -I$inc only (C and C++)"
# sanitizer builds need the sanitizer runtime when linking against the library
extra=""
case "$(ldd "$(find "$d/root" -name 'libringflow.so' | head -n 1)")" in
	*libasan*) extra="-fsanitize=address,undefined" ;;
	*libtsan*) extra="-fsanitize=thread" ;;
esac
cc -std=gnu11 -O2 $extra "$src/examples/rf-manifest.c" $flags -o "$d/manifest"
libdir=$(dirname "$(find "$d/root" -name 'libringflow.so' | head -n 1)")
mkdir -p "$d/in"
head -c 100000 /dev/urandom > "$d/in/a"
echo x > "$d/in/b"
LD_LIBRARY_PATH="$libdir" "$d/manifest" "$d/in" > "$d/out"
(cd / && find "$d/in" -type f | LC_ALL=C sort | xargs sha256sum) > "$d/expect"
cmp "$d/out" "$d/expect"
echo "embedded build from the installed ringflow works"

# The static library, linked by what `pkg-config --static` says.
a=$(find "$d/root" -name 'libringflow.a' | head -n 1)
test -n "$a" || { echo "libringflow.a was not installed" >&2; exit 1; }
sflags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$d/root$prefix" --static --cflags --libs ringflow)
echo "pkg-config --static: $sflags"
sflags=$(echo " $sflags " | sed "s| -lringflow | $a |")
cc -std=gnu11 -O2 $extra "$src/examples/rf-manifest.c" $sflags -o "$d/manifest-static"
if ldd "$d/manifest-static" | grep -q libringflow; then
	echo "the static build still loads libringflow.so" >&2; exit 1
fi
"$d/manifest-static" "$d/in" > "$d/out-static"
cmp "$d/out-static" "$d/expect"
echo "static embedded build works"

# The Python package, where /usr/bin/python3 (Debian's) looks under this prefix (/usr
# or meson's default /usr/local; not /usr/local/lib/python3/dist-packages, which it
# does not search), importable from there with the installed library alone.
so=$(find "$d/root" -name '_ringflow.abi3.so' | head -n 1)
if [ -n "$so" ] && [ -x /usr/bin/python3 ]; then
	site=$(dirname "$(dirname "$so")")
	site=${site#"$d/root"}
	case $prefix in
	/usr|/usr/local)
		/usr/bin/python3 -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$site" ||
			{ echo "the Python package went to $site: /usr/bin/python3 does not look there" >&2; exit 1; } ;;
	esac
	if [ -z "$extra" ]; then # a sanitized extension needs its runtime preloaded
		got=$(cd / && PYTHONPATH="$d/root$site" LD_LIBRARY_PATH="$libdir" /usr/bin/python3 -c \
			'import ringflow; print(ringflow.__file__)')
		case $got in
		"$d/root$site"/ringflow/*) ;;
		*) echo "import ringflow from $site found $got" >&2; exit 1 ;;
		esac
	fi
	echo "the Python package: $site"
fi

# ringflow.pc where libdir and includedir lie outside the prefix (meson keeps them
# absolute): the directories as given, not appended to the prefix.
if meson setup "$d/abs" "$src" -Dcuda=disabled -Dmpi=disabled --prefix=/opt/rf \
	--libdir=/usr/lib/rf --includedir=/usr/include/rf >"$d/abs.log" 2>&1; then
	got=$(PKG_CONFIG_PATH="$d/abs" pkg-config --cflags --libs ringflow)
	[ "$(echo $got)" = "-I/usr/include/rf -L/usr/lib/rf -lringflow" ] ||
		{ echo "ringflow.pc with absolute directories says: $got" >&2; exit 1; }
	echo "ringflow.pc with absolute directories: $got"
else
	tail -5 "$d/abs.log" >&2
	echo "meson setup with absolute directories failed" >&2
	exit 1
fi
