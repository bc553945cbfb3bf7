#!/bin/sh
# test-cli-errors: every option of rf-train, rf-pack, rf-iobench, rf-infer and rf-httpd given bad values
# and unusable paths. Each case must exit with the expected non-zero status (2 a bad
# argument, 1 a path that cannot be used) within 20 s (so a FIFO that blocks open()
# fails the test instead of hanging it), print exactly one line on stderr naming the
# option and the value or path, and nothing on stdout (rf-train: no training began).
# Values: integers with a sign, white space, junk, overflow, one past each end of the
# range; floats that are 0, negative, subnormal (1e-50 rounds to 0.0f), inf, nan,
# hex or too large; an empty value, a missing value, a value given to a flag.
# Paths, for every path option: missing, in a missing directory, under a regular
# file, a directory, a FIFO, a character device, empty, truncated, an output that names an
# input or another output. The options each tool's --help lists are enumerated and
# the test fails if one of them has no case here (a new option needs its cases).
# Needs no dataset: every case is refused before data is read (a few rf-train cases
# run only where Fashion-MNIST is installed). Each tool is its own meson test, so the
# tools run in parallel: a run of a tool costs ~0.1 s under ASan (most of it
# LeakSanitizer's scan at exit), and rf-train's cases are ~320 runs. Integer options
# share one long list of bad values (they share one parser) and get a short one each.
# usage: test-cli-errors.sh rf-train|rf-pack|rf-iobench|rf-infer path/to/that-tool [path/to/rf-pack]
WHICH=${1:?usage: $0 rf-train|rf-pack|rf-iobench path/to/it [path/to/rf-pack]}
EXE=${2:?usage}
PACK=${3:-$EXE}
TRAIN=$EXE IOB=$EXE
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-cli-errors.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v timeout >/dev/null || { echo "SKIP: no timeout(1)"; exit 77; }
covered=" "
n=0

# bad TOOL OPTION CODE TEXT args...: TOOL args exits CODE (124: it hung) within 20 s,
# one stderr line containing OPTION and TEXT (fixed strings; TEXT may hold several,
# separated by " && "), nothing on stdout.
bad() {
	tool=$1 opt=$2 code=$3 text=$4; shift 4
	timeout 20 "$EXE" "$@" </dev/null >"$T/out" 2>"$T/err"; rc=$?
	[ $rc = 124 ] && fail "$tool $*: hung (killed after 20 s)"
	[ $rc = "$code" ] || fail "$tool $*: exit $rc, want $code; stderr: $(cat "$T/err")"
	# the shell's own read and case, not wc and grep: a check costs its tool's run and
	# no four more processes (a quoted word in a case pattern matches as fixed text)
	line='' extra=''
	{ IFS= read -r line && ! IFS= read -r extra && [ -z "$extra" ]; } <"$T/err" ||
		fail "$tool $*: want one stderr line, got: $(cat "$T/err")"
	case $line in *"$opt"*) ;; *) fail "$tool $*: stderr does not name $opt: $line" ;; esac
	while [ -n "$text" ]; do
		t1=${text%% && *}
		case $line in *"$t1"*) ;; *) fail "$tool $*: stderr lacks '$t1': $line" ;; esac
		[ "$t1" = "$text" ] && break
		text=${text#* && }
	done
	[ -s "$T/out" ] && fail "$tool $*: wrote to stdout (training started?): $(head -2 "$T/out")"
	covered="$covered$tool:$opt "
	n=$((n + 1))
}

# ints TOOL OPTION MIN MAX [args...]: a sign with white space (" -1" was 2^64-1), one
# past each end of the range, no value; the message names the value and the range.
ints() {
	tool=$1 opt=$2 min=$3 max=$4; shift 4
	for v in " -1" "$(echo "$max + 1" | bc)"; do
		bad "$tool" "$opt" 2 "'$v' && $min && $max" "$@" "$opt" "$v"
	done
	[ "$min" -gt 0 ] && bad "$tool" "$opt" 2 "'$((min - 1))'" "$@" "$opt" "$((min - 1))"
	bad "$tool" "$opt" 2 "value" "$@" "$opt"      # missing value
}
# ints_more TOOL OPTION [args...]: the long list, for one option of each tool
ints_more() {
	tool=$1 opt=$2; shift 2
	# the last value is a fullwidth digit one (U+FF11, UTF-8 EF BC 91)
	for v in "" "+1" "1x" "99999999999999999999999" " 1" "1 " "-1" "x1" "0x10" "1e3" "1.5" \
		 "1,000" "$(printf '\357\274\221')"; do
		bad "$tool" "$opt" 2 "'$v'" "$@" "$opt" "$v"
	done
}

# ---- fixtures ---------------------------------------------------------------------
mkfifo "$T/fifo" || fail "mkfifo"
mkdir "$T/dir" "$T/ro"
: >"$T/empty"
echo "some text" >"$T/text"
# a 2-record IDX pair (2x2 images) for rf-pack; truncated copies
printf '\0\0\10\3\0\0\0\2\0\0\0\2\0\0\0\2\1\2\3\4\5\6\7\10' >"$T/img.idx"
printf '\0\0\10\1\0\0\0\2\1\0' >"$T/lab.idx"
head -c 20 "$T/img.idx" >"$T/img-short.idx"
head -c 9 "$T/lab.idx" >"$T/lab-short.idx"
if [ "${PACK##*/}" = rf-pack ]; then
	"$PACK" --images "$T/img.idx" --labels "$T/lab.idx" -o "$T/ok.rfrec" >/dev/null ||
		fail "rf-pack of the fixture failed"
	head -c 100 "$T/ok.rfrec" >"$T/short.rfrec"
fi
head -c 65536 /dev/zero >"$T/f64k"
# Fashion-MNIST look-alike directories whose files are not regular files
mkdir "$T/data-fifo" "$T/data-dir"
mkfifo "$T/data-fifo/train-images-idx3-ubyte.gz"
mkdir "$T/data-dir/t10k-labels-idx1-ubyte"
fifo=$T/fifo
# The character device. As root, a node of our own (1:3, like /dev/null) in $T: a
# tool that wrongly renamed its output over /dev/null itself (rf-pack -o and
# --checkpoint write PATH.tmp and rename it over PATH) would replace the system's
# /dev/null. Without root /dev/null is used; it cannot be replaced then. As root
# without mknod, the cases that could rename over it are left out.
dev=/dev/null
devout=$dev
if [ "$(id -u)" = 0 ]; then
	if mknod "$T/null" c 1 3 2>/dev/null; then
		dev=$T/null devout=$T/null
	else
		devout=""
		echo "note: root without mknod: no character device as an output path"
	fi
fi

command -v bc >/dev/null || bc() { python3 -c "print(eval(input()))"; }

# ---- rf-train ---------------------------------------------------------------------
if [ "$WHICH" = rf-train ]; then
R=rf-train
ints $R --epochs 0 100000
ints_more $R --seed
ints $R --batch-size 1 1048576
ints $R --devices 1 16
ints $R --seed 0 18446744073709551615
export RF_FAULT_INJECT="short=0.1,bogus=1"   # malformed: one line naming the variable
bad $R RF_FAULT_INJECT 1 "bogus && unknown key" --epochs 1
unset RF_FAULT_INJECT
ints $R --limit 1 18446744073709551615
ints $R --test-limit 1 18446744073709551615
ints $R --log-every 1 4294967295
ints $R --threads 1 1024
ints $R --streams 1 2
ints $R --prefetch 1 16
ints $R --window 0 65536
ints $R --barrier-every 0 4294967295
ints $R --max-inflight 0 4294967294
ints $R --bucket-kb 0 1048576
ints $R --checkpoint-every 1 1000000000
ints $R --max-steps 0 9223372036854775807
ints $R --http-timeout 1 3600000
for v in "" tcp MPI "mpi "; do bad $R --dist 2 "expected mpi" --dist "$v"; done
bad $R --dist 2 "value" --dist
for o in --momentum --wd; do
	for v in -0.1 x nan inf 1e4 " 1" "" 1e-50; do
		bad $R $o 2 "expected a decimal from 0 to 1e3" $o "$v"
	done
	bad $R $o 2 "value" $o
done
bad $R --nesterov 2 "needs --momentum > 0" --nesterov
for v in "" SGD adam "adamw " lamb; do
	bad $R --optimizer 2 "got '$v', expected sgd or adamw" --optimizer "$v"
done
bad $R --optimizer 2 "value" --optimizer
bad $R --optimizer 2 "adamw has no --momentum or --nesterov" --optimizer adamw --momentum 0.9
for v in "" step step: step:0 step:x step:2: step:2:0 step:2:-1 step:2:x step:100001 \
	 "step:2 " Cosine linear cosine: cosine:0 cosine:x cosine:3: cosine:100001; do
	bad $R --lr-schedule 2 "got '$v', expected constant, step:N[:G]" --lr-schedule "$v"
done
bad $R --lr-schedule 2 "value" --lr-schedule
bad $R --lr-schedule 2 "cosine over 2 epochs with a warm-up of 2" --lr-schedule cosine:2 \
	--warmup-epochs 2
bad $R --lr-schedule 2 "cosine over 3 epochs with a warm-up of 3" --lr-schedule cosine \
	--warmup-epochs 3 --epochs 3
ints $R --warmup-epochs 0 100000
bad $R --nesterov 2 "needs --momentum > 0" --nesterov --momentum 0
for v in "" -1 x nan inf 1e7 " 5"; do
	bad $R --dist-timeout 2 "expected seconds" --dist mpi --dist-timeout "$v"
done
bad $R --dist-timeout 2 "needs --dist mpi or --dist-store" --dist-timeout 5
bad $R --dist-store 2 "expected a directory" --dist-store ""
bad $R --dist-store 2 "value" --dist-store
bad $R --dist-store 2 "not with --dist mpi" --dist-store "$T/store" --dist mpi
bad $R --dist-store 2 "needs --device cuda" --dist-store "$T/store"
# the environment contract, read before anything starts (no GPU needed to see these;
# a build without CUDA refuses --device cuda first, from rf_trainer_check_opts: there
# every case must name that instead; tests/comm/test-store.c checks the contract itself)
nocuda=$("$EXE" --device cuda --dist-store "$T/store" 2>&1 >/dev/null | grep -c "built without CUDA")
if [ "$nocuda" != 0 ]; then
	(unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
	 bad $R --device 1 "built without CUDA" --dist-store "$T/store" --device cuda
	 WORLD_SIZE=2 RANK=x bad $R --device 1 "built without CUDA" --dist-store "$T/store" \
		--device cuda) || exit 1
else
(unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
 bad $R --dist-store 1 "WORLD_SIZE is not set" --dist-store "$T/store" --device cuda
 export WORLD_SIZE=2
 for v in 2 -1 x "" " 1"; do
	RANK=$v bad $R --dist-store 1 "RANK=$v: expected an integer from 0 to 1" \
		--dist-store "$T/store" --device cuda
 done
 export RANK=0 LOCAL_RANK=1 LOCAL_WORLD_SIZE=1
 bad $R --dist-store 1 "LOCAL_WORLD_SIZE=1: expected an integer from 2 to 2" \
	--dist-store "$T/store" --device cuda) || exit 1
fi
bad $R --dist-timeout 2 "value" --dist-timeout
for v in "" "0" "-0.1" "1e-50" "1e-39" "nan" "inf" " 0.1" "0.1 " "+0.1" "0x1p-3" "1e7" \
	 "1e400" "0.1.2" "1e" "."; do
	bad $R --lr 2 "'$v' && 1e6" --lr "$v"
done
bad $R --lr 2 "value" --lr
for v in MLP "a
b"; do bad $R --model 2 "expected mlp|lenet|resnet18" --model "$v"; done
bad $R --model 2 "value" --model
export RF_CUDNN=0     # cuDNN turned off: ResNet-18's batch norm has nothing to run on a GPU
# (a build without CUDA, as the sanitizer builds are, says that instead: its first
# layer already has nothing to run on; and what to do)
why="a cuda device does not run batchnorm_fwd && through cuDNN && turned off by RF_CUDNN=0"
"$EXE" --model resnet18 --device cuda --epochs 1 2>&1 | grep -q "built without CUDA" &&
	why="a cuda device does not run conv2d_fwd && built without CUDA (reconfigure with -Dcuda=enabled"
bad $R --model 1 "resnet18 --device cuda && $why" --model resnet18 --device cuda
unset RF_CUDNN
for v in ""; do bad $R --device 2 "expected cpu or cuda" --device "$v"; done
for v in fp16 FP32 "" "tf32 "; do bad $R --precision 2 "'$v' && fp32, tf32 or bf16" --precision "$v"; done
bad $R --precision 2 "value" --precision
for v in NHWC chw ""; do bad $R --layout 2 "'$v' && auto, nchw or nhwc" --layout "$v"; done
bad $R --layout 2 "value" --layout
ints $R --image-size 8 4096
for v in big IMAGENET ""; do bad $R --stem 2 "'$v' && auto, small or imagenet" --stem "$v"; done
bad $R --stem 2 "value" --stem
for v in 0 1.5 -0.1 x ""; do bad $R --crop-scale 2 "'$v' && (0, 1]" --crop-scale "$v"; done
bad $R --crop-scale 2 "value" --crop-scale
# options of image data without --image-size (the data are not images)
bad $R --stem 2 "needs --image-size" --stem imagenet
bad $R --stem 2 "needs --image-size" --stem small
bad $R --crop-scale 2 "needs --image-size" --crop-scale 0.5
for v in 0.5 0.5/0 /1 0.5/ 1,2/3 1,2,3,4,5/1,1,1,1,1 a/b 1/inf 1e39/1 Imagenet "0.5/1 " ""; do
	bad $R --normalize 2 "'$v' && MEAN/STD && 'imagenet' && 1 to 4 && no STD 0" --normalize "$v"
done
# and what is wrong with it, each problem by name (it said "one finite number or 4
# separated by commas" for a STD of 0)
bad $R --normalize 2 "no '/' between MEAN and STD" --normalize 0.5
bad $R --normalize 2 "STD value 1 is 0" --normalize 0.5/0
bad $R --normalize 2 "STD value 2 is 0" --normalize 0.1,0.2/0.5,-0
bad $R --normalize 2 "MEAN value 1: '' is not a number" --normalize /1
bad $R --normalize 2 "MEAN value 2: 'x' is not a number" --normalize 1,x/1,1
bad $R --normalize 2 "2 MEAN value(s) and 1 STD value(s)" --normalize 1,2/3
bad $R --normalize 2 "more than 4 STD values" --normalize 1/1,1,1,1,1
bad $R --normalize 2 "STD value 1: inf is not finite" --normalize 1/inf
bad $R --normalize 2 "MEAN value 1: 1e39 is not finite or beyond a float's range" --normalize 1e39/1
bad $R --normalize 2 "value" --normalize
for v in all layer ""; do bad $R --update 2 "'$v' && fused, per-layer or auto" --update "$v"; done
bad $R --device 2 "value" --device
for v in he; do bad $R --init 2 "expected uniform" --init "$v"; done
bad $R --init 2 "value" --init
for v in random "" Uniform "uniform "; do bad $R --order 2 "expected uniform or windowed" --order "$v"; done
bad $R --order 2 "value" --order
for f in resume json in-memory verify augment no-eval quiet stats hybridize no-hybridize help \
	skip-bad-images; do
	bad $R "--$f" 2 "takes no value" "--$f=1"
done
bad $R --bogus 2 "unknown" --bogus
bad $R --dev 2 "ambiguous" --dev 1
bad $R stray 2 "unexpected argument" --model mlp stray
bad $R --resume 2 "needs --checkpoint" --resume
bad $R --checkpoint-every 2 "needs --checkpoint" --checkpoint-every 5
bad $R --devices 2 "more than the 4 samples" --devices 8 --batch-size 4
# --data: a directory whose IDX files (where present) are regular files, or a .rfrec
bad $R --data 2 "empty path" --data ""
bad $R --data 1 "$T/text: offset 0: bad magic" --data "$T/text"
bad $R --data 1 "is a FIFO, expected a directory" --data "$fifo"
bad $R --data 1 "is a character device" --data "$dev"
bad $R --data 1 "train-images-idx3-ubyte.gz: is a FIFO" --data "$T/data-fifo"
bad $R --data 1 "t10k-labels-idx1-ubyte: is a directory" --data "$T/data-dir"
bad $R --data 2 "value" --data
bad $R --test-data 1 "cannot open" --test-data "$T/none.rfrec"
bad $R --test-data 1 "empty path" --test-data ""
bad $R --test-data 1 "is a directory" --test-data "$T"
if [ -e "$T/ok.rfrec" ]; then
	bad $R --test-data 1 "text: offset 0: bad magic" --data "$T/ok.rfrec" --test-data "$T/text"
	bad $R --data 1 "short.rfrec" --data "$T/short.rfrec"
	# a valid record file of 2x2 images: the trainer names the shape found
	bad $R "$T/ok.rfrec" 1 "header: images of 2x2, expected 28x28" --data "$T/ok.rfrec" \
		--test-data "$T/ok.rfrec"
fi
bad $R --test-data 2 "a directory of IDX files holds both sets" --data "$T" --test-data "$T/text"
bad $R --test-data 2 "value" --test-data
# outputs: checked before anything runs
for o in --checkpoint --metrics --trace; do
	bad $R $o 1 "$T/nodir: No such file" $o "$T/nodir/out"
	bad $R $o 1 "is a directory" $o "$T/dir"
	bad $R $o 1 "is a FIFO" $o "$fifo"
	[ -n "$devout" ] && bad $R $o 1 "is a character device" $o "$devout"
	bad $R $o 2 "empty path" $o ""
	bad $R $o 2 "value" $o
done
bad $R --checkpoint 1 "$T/text/out: cannot create: Not a directory" --checkpoint "$T/text/out"
bad $R --metrics 1 "ends in '/'" --metrics "$T/newdir/"
bad $R --export 1 "is a regular file" --export "$T/text"
bad $R --export 1 "is a FIFO" --export "$fifo"
bad $R --export 1 "is not a writable directory" --export "$T/nodir/x"
bad $R --export 2 "empty path" --export ""
bad $R --export 2 "value" --export
if [ "$(id -u)" != 0 ]; then
	chmod 555 "$T/ro"
	for o in --checkpoint --metrics --trace; do
		bad $R $o 1 "cannot create" $o "$T/ro/out"
	done
fi
bad $R --metrics 1 "the same file as --checkpoint" --checkpoint "$T/o1" --metrics "$T/o1"
bad $R --trace 1 "the same file as --metrics" --metrics "$T/o2" --trace "$T/./o2"
bad $R --trace 1 "--checkpoint $T/o3 is written through" --checkpoint "$T/o3" --trace "$T/o3.tmp"
mkfifo "$T/ck.tmp"
bad $R --checkpoint 1 "$T/ck.tmp: is a FIFO" --checkpoint "$T/ck"
# --resume: the checkpoint must be there, a regular file, a checkpoint, of this model
bad $R --checkpoint 1 "No such file" --resume --checkpoint "$T/none.ckpt"
bad $R --checkpoint 1 "is a FIFO" --resume --checkpoint "$fifo"
bad $R --checkpoint 1 "is a directory" --resume --checkpoint "$T/dir"
bad $R --checkpoint 1 "is a character device" --resume --checkpoint "$dev"
bad $R "$T/empty" 1 "file is empty" --resume --checkpoint "$T/empty"
bad $R "$T/text" 1 "not a ringflow checkpoint" --resume --checkpoint "$T/text"
# an output that is an input (--data, --test-data, the test set beside --data, an IDX
# file of a --data directory, raw or .gz) is refused before anything runs, naming both
if [ -e "$T/ok.rfrec" ]; then
	cp "$T/ok.rfrec" "$T/in-train.rfrec" && cp "$T/ok.rfrec" "$T/in-t10k.rfrec" &&
		cp "$T/ok.rfrec" "$T/in.tmp" && mkdir "$T/inx" && cp "$T/ok.rfrec" "$T/inx/model.json" ||
		fail "copies of ok.rfrec"
	Q="--data $T/in-train.rfrec"
	bad $R --metrics 1 "$T/in-train.rfrec: the same file as an input (--data)" $Q \
		--metrics "$T/in-train.rfrec"
	bad $R --trace 1 "the same file as an input (the test set beside --data" $Q \
		--trace "$T/./in-t10k.rfrec"
	bad $R --checkpoint 1 "$T/in-t10k.rfrec: the same file as an input (the test set beside" \
		$Q --checkpoint "$T/in-t10k.rfrec"
	bad $R --metrics 1 "the same file as an input (--test-data)" $Q --test-data "$T/ok.rfrec" \
		--metrics "$T/ok.rfrec"
	bad $R --checkpoint 1 "$T/in.tmp: the same file as an input (--data)" \
		--data "$T/in.tmp" --test-data "$T/ok.rfrec" --checkpoint "$T/in"
	bad $R --export 1 "$T/inx/model.json: the same file as an input (--data)" \
		--data "$T/inx/model.json" --test-data "$T/ok.rfrec" --export "$T/inx"
	for f in in-train.rfrec in-t10k.rfrec in.tmp inx/model.json; do
		cmp -s "$T/ok.rfrec" "$T/$f" || fail "a refused rf-train run changed its input $f"
	done
fi
mkdir "$T/idx"
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte t10k-images-idx3-ubyte \
	 t10k-labels-idx1-ubyte.gz; do
	echo "$f" >"$T/idx/$f"
done
bad $R --metrics 1 "train-images-idx3-ubyte.gz: the same file as an input (a file of --data" \
	--data "$T/idx" --metrics "$T/idx/train-images-idx3-ubyte.gz"
bad $R --checkpoint 1 "t10k-labels-idx1-ubyte.gz): the same file as an input" \
	--data "$T/idx/" --checkpoint "$T/idx/../idx/t10k-labels-idx1-ubyte.gz"
bad $R --trace 1 "t10k-images-idx3-ubyte: the same file as an input" --data "$T/idx" \
	--trace "$T/idx/t10k-images-idx3-ubyte"
[ "$(cat "$T/idx/train-images-idx3-ubyte.gz")" = train-images-idx3-ubyte.gz ] ||
	fail "a refused rf-train run changed an IDX file of --data"
# an output inside a folder of images read as input (--data, its test set beside it,
# --test-data) is refused before anything is packed or written; the images unchanged
mkdir -p "$T/imf/train/a" "$T/imf/test/a" "$T/imf/val/a"
for d in train test val; do echo jpg >"$T/imf/$d/a/0.jpg"; done
F="--data $T/imf/train --image-size 8"
XDG_CACHE_HOME="$T/xdg" bad $R --checkpoint 1 "0.jpg: inside --data $T/imf/train" $F \
	--checkpoint "$T/imf/train/a/0.jpg"
XDG_CACHE_HOME="$T/xdg" bad $R --metrics 1 "inside --data's test set $T/imf/val" $F \
	--metrics "$T/imf/val/a/0.jpg"
XDG_CACHE_HOME="$T/xdg" bad $R --export 1 "inside --data $T/imf/train" $F \
	--export "$T/imf/val/../train/new"
XDG_CACHE_HOME="$T/xdg" bad $R --trace 1 "inside --test-data $T/imf/test" $F \
	--test-data "$T/imf/test" --trace "$T/imf/test/t.json"
# a trailing slash, a link in the folder to a file outside it (replaced or written
# through), and a link outside it to an image in it
XDG_CACHE_HOME="$T/xdg" bad $R --export 1 "inside --data $T/imf/train" $F \
	--export "$T/imf/train/new//"
echo out >"$T/outside.jpg" && ln -s "$T/outside.jpg" "$T/imf/train/a/l.jpg" &&
	ln -s "$T/imf/train/a/0.jpg" "$T/lnk" || fail "links"
XDG_CACHE_HOME="$T/xdg" bad $R --checkpoint 1 "l.jpg: inside --data" $F \
	--checkpoint "$T/imf/train/a/l.jpg"
XDG_CACHE_HOME="$T/xdg" bad $R --metrics 1 "lnk: inside --data" $F --metrics "$T/lnk"
rm "$T/imf/train/a/l.jpg"
for d in train test val; do
	[ "$(cat "$T/imf/$d/a/0.jpg")" = jpg ] || fail "a refused rf-train run changed an image of $d"
done
[ ! -e "$T/imf/train/new" ] && [ ! -e "$T/imf/test/t.json" ] || fail "a refused run wrote into a folder"
# --export DIR is no other option's file (the file was made, the export failed after
# the training)
bad $R --export 1 "$T/q1: the file --metrics writes" --metrics "$T/q1" --export "$T/q1"
bad $R --export 1 "the file --checkpoint writes" --checkpoint "$T/q2" --export "$T/q2"
bad $R --export 1 "the file --trace writes" --trace "$T/q3" --export "$T/./q3"
bad $R --export 1 "the file --metrics writes" --metrics "$T/q4" --export "$T/q4//"
# --export DIR's own files: checked before training, not after it
mkdir "$T/exf" "$T/exg"
mkfifo "$T/exf/model.json" "$T/exg/params.rfck.tmp"
bad $R --export 1 "$T/exf/model.json: is a FIFO" --export "$T/exf"
bad $R --export 1 "$T/exg/params.rfck.tmp: is a FIFO" --export "$T/exg"
# https is not read (it was taken for a directory of IDX files)
bad $R --data 2 "https is not supported" --data https://127.0.0.1:1/x-train.rfrec
bad $R --test-data 2 "https is not supported" --data "$T/ok.rfrec" --test-data https://h/t.rfrec
# nor any other SCHEME:// (ftp://x/y was taken for a directory: "Fashion-MNIST not
# found: ftp://x/y/train-images...")
for u in ftp://x/y s3://bucket/train.rfrec file:///tmp/x.rfrec HTTP://h/x.rfrec gs+x.1://a; do
	bad $R --data 2 "'$u' && ${u%%://*} is not supported && http://HOST" --data "$u"
	bad $R --test-data 2 "'$u' && ${u%%://*} is not supported" --data "$T/ok.rfrec" --test-data "$u"
done
# several processes: refused with the arguments, before MPI starts
bad $R --hybridize 2 "one process only && not with --dist mpi" --hybridize --dist mpi
# a bad short option inside a cluster is named itself, not its neighbour
bad $R -x 2 "-x: unknown option" -xy
bad $R -x 2 "-x: unknown option" --epochs 1 -xy
# nothing was created by any refused run
[ -z "$(ls "$T/dir")" ] && ! [ -e "$T/o1" ] && ! [ -e "$T/o2" ] && ! [ -e "$T/o3" ] &&
	! [ -e "$T/ck" ] || fail "a refused rf-train run left a file: $(ls "$T" "$T/dir")"

DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [ -r "$DATA/train-images-idx3-ubyte.gz" ] || [ -r "$DATA/train-images-idx3-ubyte" ]; then
	# a real checkpoint cut short, and one from the other model
	"$TRAIN" --data "$DATA" --limit 256 --test-limit 256 --epochs 1 --no-eval --quiet \
		--checkpoint "$T/mlp.ckpt" >/dev/null 2>"$T/err" || fail "mlp run: $(cat "$T/err")"
	head -c 5000 "$T/mlp.ckpt" >"$T/cut.ckpt"
	bad $R "$T/cut.ckpt" 1 "truncated" --data "$DATA" --resume --checkpoint "$T/cut.ckpt"
	bad $R "--model lenet" 1 "is for model 'mlp'" --model lenet --data "$DATA" --resume \
		--checkpoint "$T/mlp.ckpt"
	# --lr 1e-50 was the default lr (0.1) in disguise; a tiny normal lr is used as is
	"$TRAIN" --data "$DATA" --limit 256 --test-limit 256 --epochs 0 --lr 1e-30 --json \
		>"$T/j" 2>"$T/err" || fail "--lr 1e-30: $(cat "$T/err")"
	grep -q '"lr": 1e-30' "$T/j" || fail "--lr 1e-30 not used: $(cat "$T/j")"
else
	echo "note: Fashion-MNIST not in $DATA: truncated-checkpoint cases not run"
fi

fi

# ---- rf-pack ----------------------------------------------------------------------
if [ "$WHICH" = rf-pack ]; then
P=rf-pack
I="--images $T/img.idx"
L="--labels $T/lab.idx"
ints $P --classes 1 256 $I $L -o "$T/x.rfrec"
ints_more $P --classes $I $L -o "$T/x.rfrec"
for o in --images --labels; do
	if [ $o = --images ]; then other=$L; else other=$I; fi
	bad $P $o 1 "$T/none: cannot open: No such file" $other $o "$T/none" -o "$T/x.rfrec"
	bad $P $o 1 "is a FIFO" $other $o "$fifo" -o "$T/x.rfrec"
	bad $P $o 1 "is a directory" $other $o "$T/dir" -o "$T/x.rfrec"
	bad $P $o 1 "is a character device" $other $o "$dev" -o "$T/x.rfrec"
	bad $P $o 2 "empty path" $other $o "" -o "$T/x.rfrec"
	bad $P $o 2 "missing value" $o
done
# image folders and WebDataset shards
bad $P --image-folder 1 "cannot list: No such file" --image-folder "$T/none" -o "$T/x.rfrec"
bad $P --image-folder 1 "no subfolders, expected one per class" --image-folder "$T/dir" -o "$T/x.rfrec"
bad $P --image-folder 2 "empty path" --image-folder "" -o "$T/x.rfrec"
bad $P --image-folder 2 "missing value" --image-folder
bad $P --image-folder 2 "cannot be combined" --image-folder "$T/dir" $I -o "$T/x.rfrec"
bad $P -o 2 "missing" --image-folder "$T/dir"
mkdir -p "$T/pf/a" && echo jpg >"$T/pf/a/0.jpg"
bad $P -o 1 "inside --image-folder $T/pf" --image-folder "$T/pf" -o "$T/pf/x.rfrec"
bad $P -o 1 "inside --image-folder" --image-folder "$T/pf" -o "$T/pf/a/0.jpg" --force
[ "$(cat "$T/pf/a/0.jpg")" = jpg ] && [ ! -e "$T/pf/x.rfrec" ] || fail "rf-pack -o inside its folder"
bad $P --webdataset 2 "no shard given" --webdataset -o "$T/x.rfrec"
bad $P --webdataset 2 "cannot be combined" --webdataset $I "$T/text" -o "$T/x.rfrec"
bad $P --webdataset 1 "is a FIFO" --webdataset "$fifo" -o "$T/x.rfrec"
bad $P "$T/text" 1 "offset 0 && truncated header" --webdataset "$T/text" -o "$T/x.rfrec"
# a file that does not open as a shard of images leaves no index behind (an empty
# file, a valid empty archive, left empty.idx beside it): the index is written only
# once the shard is accepted, beside it or in the cache directory
mkdir "$T/wtxt" && echo hi >"$T/wtxt/a.txt" && (cd "$T/wtxt" && tar -cf "$T/txt.tar" a.txt) ||
	fail "tar of text"
for f in "$T/empty" "$T/txt.tar"; do
	XDG_CACHE_HOME="$T/xdg" bad $P "$f" 1 "no sample with a .jpg, .jpeg or .png member" \
		--webdataset "$f" -o "$T/x.rfrec"
	[ ! -e "$f.idx" ] && [ -z "$(ls -A "$T/xdg" 2>/dev/null | head -1)" ] ||
		fail "rf-pack --webdataset $f: refused, and an index was written: $(ls "$f.idx" "$T/xdg" 2>&1)"
done
bad $P --skip-bad-images 2 "only with --image-folder" --skip-bad-images $I $L -o "$T/x.rfrec"
# an empty image: refused naming the way on; with --skip-bad-images passed over as any
# other bad one (it stopped the run: 0 bytes was refused before the skip was asked)
mkdir -p "$T/pe/a" && : >"$T/pe/a/empty.jpg" && printf '\377\330\377\340' >"$T/pe/a/ok.jpg"
bad $P --skip-bad-images 1 "empty.jpg: 0 bytes && passes over an empty one" \
	--image-folder "$T/pe" -o "$T/x.rfrec"
"$EXE" --image-folder "$T/pe" --skip-bad-images -o "$T/pe.rfrec" >"$T/out" 2>&1 &&
	grep -q "passed over: 1" "$T/out" || fail "rf-pack --skip-bad-images, an empty image: $(cat "$T/out")"
bad $P "$T/empty" 1 "$T/empty" $L --images "$T/empty" -o "$T/x.rfrec"
bad $P "$T/img-short.idx" 1 "truncated" $L --images "$T/img-short.idx" -o "$T/x.rfrec"
bad $P "$T/lab-short.idx" 1 "truncated" $I --labels "$T/lab-short.idx" -o "$T/x.rfrec"
for o in -o --output; do   # rf-pack names the option -o either way
	bad $P -o 1 "$T/nodir: No such file" $I $L $o "$T/nodir/x.rfrec"
	bad $P -o 1 "is a directory" $I $L $o "$T/dir" --force
	bad $P -o 1 "is a FIFO" $I $L $o "$fifo" --force
	[ -n "$devout" ] && bad $P -o 1 "is a character device" $I $L $o "$devout" --force
	bad $P -o 1 "file exists" $I $L $o "$T/ok.rfrec"
	bad $P -o 1 "the same file as --images" $I $L $o "$T/img.idx" --force
	bad $P -o 1 "the same file as --labels" $I $L $o "$T/./lab.idx" --force
	bad $P -o 2 "missing value" $I $L $o
done
covered="$covered$P:--output "
bad $P -o 2 "empty path" $I $L -o ""
mkfifo "$T/y.rfrec.tmp"
bad $P -o 1 "y.rfrec.tmp: is a FIFO" $I $L -o "$T/y.rfrec"
# the scratch file OUT.tmp: an input there is not truncated and removed; a symbolic
# link there is not written through; another writer's (its lock held) is left to it
cp "$T/img.idx" "$T/z.tmp"
bad $P -o 1 "z.tmp is --images" --images "$T/z.tmp" $L -o "$T/z"
cmp -s "$T/img.idx" "$T/z.tmp" || fail "rf-pack -o z changed its input z.tmp"
rm "$T/z.tmp"
echo keep > "$T/target"
ln -s "$T/target" "$T/w.rfrec.tmp"
bad $P -o 1 "w.rfrec.tmp: is a symbolic link" $I $L -o "$T/w.rfrec"
[ "$(cat "$T/target")" = keep ] || fail "rf-pack wrote through a link at OUT.tmp"
rm "$T/w.rfrec.tmp"
ln "$T/target" "$T/h.rfrec.tmp"   # a hard link: truncating it would empty target
bad $P -o 1 "h.rfrec.tmp: has 2 names" $I $L -o "$T/h.rfrec"
[ "$(cat "$T/target")" = keep ] || fail "rf-pack truncated a hard link at OUT.tmp"
rm "$T/h.rfrec.tmp" "$T/target"
if command -v flock >/dev/null; then
	: > "$T/v.rfrec.tmp"
	flock "$T/v.rfrec.tmp" sh -c ": > '$T/v.held'; sleep 5" &
	for _ in $(seq 100); do [ -e "$T/v.held" ] && break; sleep 0.1; done
	bad $P -o 1 "v.rfrec.tmp: locked && another writer" $I $L -o "$T/v.rfrec"
	wait
	rm -f "$T/v.held"
	[ -e "$T/v.rfrec.tmp" ] || fail "rf-pack removed another writer's OUT.tmp"
	rm "$T/v.rfrec.tmp"
fi
bad $P --check 1 "No such file" --check "$T/none"
bad $P --check 2 "empty path" --check ""
bad $P --check 1 "is a FIFO" --check "$fifo"
bad $P --check 1 "is a directory" --check "$T/dir"
bad $P --check 1 "is a character device" --check "$dev"
bad $P "$T/empty" 1 "file is empty" --check "$T/empty"
bad $P "$T/short.rfrec" 1 "inside the 4096-byte header" --check "$T/short.rfrec"
bad $P --check 2 "cannot be combined" --check "$T/ok.rfrec" -o "$T/x.rfrec"
bad $P --check 2 "missing value" --check
bad $P --force 2 "takes no value" --force=1
bad $P --help 2 "takes no value" --help=1
bad $P --bogus 2 "unknown" --bogus
# a bad short option inside a cluster is named itself (the previous argument was)
bad $P -x 2 "-x: unknown option" -xy
bad $P -x 2 "-x: unknown option" $I -xy
bad $P -x 2 "-x: unknown option" --force -xy
# a summary that cannot be written is an error (it exited 0)
if [ -w /dev/full ]; then
	timeout 20 "$EXE" --check "$T/ok.rfrec" >/dev/full 2>"$T/err"; rc=$?
	[ $rc = 1 ] && grep -q "^rf-pack: stdout: No space left on device" "$T/err" ||
		fail "rf-pack --check >/dev/full: exit $rc: $(cat "$T/err")"
fi
bad $P stray 2 "unexpected" $I $L -o "$T/x.rfrec" stray
! [ -e "$T/x.rfrec" ] && ! [ -e "$T/x.rfrec.tmp" ] && [ -p "$T/y.rfrec.tmp" ] ||
	fail "a refused rf-pack run left or removed a file: $(ls "$T")"

fi

# ---- rf-iobench -------------------------------------------------------------------
if [ "$WHICH" = rf-iobench ]; then
B=rf-iobench
F="--file $T/f64k --rw read"
ints $B --qd 1 16384 $F --bs 4k
ints $B --batch 0 65536 $F --bs 4k --qd 1
ints_more $B --qd $F --bs 4k
for v in "" "0" " 4k" "+4k" "-4k" "4x" "4kk" "k" "2g" "1025m" "99999999999999999999" "4k "; do
	bad $B --bs 2 "'$v'" $F --qd 1 --bs "$v"
done
bad $B --bs 2 "1 to 1g" $F --qd 1 --bs 2g
bad $B --bs 2 "multiple of 512" $F --qd 1 --bs 1000 --direct
bad $B --bs 2 "value" $F --qd 1 --bs
# ranges and splits: each refusal says why
bad $B --bs 2 "'4k-' && empty" $F --qd 1 --bs 4k-
bad $B --bs 2 "'-4k' is negative" $F --qd 1 --bs -4k
bad $B --bs 2 "'-8k' has a sign" $F --qd 1 --bs 4k--8k
bad $B --bs 2 "'8k-4k' && larger to a smaller" $F --qd 1 --bs 8k-4k
bad $B --bs 2 "'4k-2g' && '2g' is not a size from 1 to 1g" $F --qd 1 --bs 4k-2g
bad $B --bs 2 "add up to 90 %, expected 100" $F --qd 1 --bs 4k/50:8k/40
bad $B --bs 2 "add up to 120 %, more than 100" $F --qd 1 --bs 4k/60:8k/60:16k
bad $B --bs 2 "6144 is not a multiple of the smallest size 4096" $F --qd 1 --bs 6k/50:4k/50
for v in "4k/" "4k/x" "4k/101" "4k/-1" "4k/50:" ":4k"; do
	bad $B --bs 2 "'$v'" $F --qd 1 --bs "$v"
done
bad $B --bs 2 "multiple of 512 with --direct" $F --qd 1 --bs 1000-4000 --direct
bad $B --bs 2 "at least 32 bytes with --verify" $F --qd 1 --bs 16-4k --verify crc32c
for v in "" "0" " 1m" "-1" "1m1" "9999999t" "8193p"; do
	bad $B --size 2 "'$v'" $F --bs 4k --qd 1 --size "$v"
done
bad $B --size 2 "value" $F --bs 4k --qd 1 --size
for v in "" "0" "-1" "nan" "inf" " 1" "1 " "1e7" "0.0001" "0x10" "1s"; do
	bad $B --runtime 2 "'$v'" $F --bs 4k --qd 1 --runtime "$v"
done
bad $B --runtime 2 "value" $F --bs 4k --qd 1 --runtime
for v in "" bogus READ "read "; do
	bad $B --rw 2 "expected read, randread, write, randwrite, rw, randrw, trim or randtrim" --file "$T/f64k" --bs 4k --qd 1 --rw "$v"
done
bad $B --rw 2 "missing" --file "$T/f64k" --bs 4k --qd 1
bad $B --rw 2 "value" --file "$T/f64k" --bs 4k --qd 1 --rw
bad $B --bs 2 "missing" $F --qd 1
bad $B --qd 2 "missing" $F --bs 4k
bad $B --file 2 "missing" --rw read --bs 4k --qd 1
bad $B --file 2 "value" --rw read --bs 4k --qd 1 --file
bad $B --file 2 "empty path" --rw read --bs 4k --qd 1 --file ""
for rw in read randread; do
	bad $B --file 1 "$T/none: cannot open for reading: No such file" --rw $rw --bs 4k --qd 1 --file "$T/none"
	bad $B --file 1 "$fifo: is a FIFO" --rw $rw --bs 4k --qd 1 --file "$fifo"
	bad $B --file 1 "is a directory" --rw $rw --bs 4k --qd 1 --file "$T/dir"
	bad $B --file 1 "$dev: is a character device" --rw $rw --bs 4k --qd 1 --file "$dev"
	bad $B --file 1 "0 bytes to use, less than one block" --rw $rw --bs 4k --qd 1 --file "$T/empty"
	bad $B --file 1 "fewer than --size" --rw $rw --bs 4k --qd 1 --file "$T/f64k" --size 1m
done
for rw in write randwrite; do
	bad $B --file 1 "$fifo: is a FIFO" --rw $rw --bs 4k --qd 1 --file "$fifo" --force
	bad $B --file 1 "$fifo: is a FIFO" --rw $rw --bs 4k --qd 1 --file "$fifo"
	bad $B --file 1 "is a directory" --rw $rw --bs 4k --qd 1 --file "$T/dir" --force
	bad $B --file 1 "is a character device" --rw $rw --bs 4k --qd 1 --file "$dev" --force
	bad $B --file 1 "exists" --rw $rw --bs 4k --qd 1 --file "$T/f64k"
	bad $B --file 1 "$T/nodir/new: cannot create" --rw $rw --bs 4k --qd 1 --file "$T/nodir/new" --size 1m
	bad $B --size 2 "for the new file" --rw $rw --bs 4k --qd 1 --file "$T/new"
	bad $B --file 1 "less than one block" --rw $rw --bs 8k --qd 1 --file "$T/new" --size 4k
done
! [ -e "$T/new" ] || fail "a refused rf-iobench write left $T/new"
for f in direct fixedbufs json force help norandommap end-fsync time-based sqpoll hipri; do
	bad $B "--$f" 2 "takes no value" "--$f=1"
done
M="--file $T/f64k --rw randrw --bs 4k --qd 1 --force"
ints $B --rwmixread 0 100 $M
ints $B --invalidate 0 1 $M
ints $B --fsync 1 4294967295 $M
bad $B --fdatasync 2 "'0' && 1 && 4294967295" $M --fdatasync 0   # --fsync's parser
bad $B --rwmixread 2 "applies to --rw rw or randrw" $F --bs 4k --qd 1 --rwmixread 50
bad $B --norandommap 2 "applies to random modes" $F --bs 4k --qd 1 --norandommap
bad $B --fsync 2 "applies to modes that write" $F --bs 4k --qd 1 --fsync 8
bad $B --end-fsync 2 "applies to modes that write" $F --bs 4k --qd 1 --end-fsync
bad $B --fdatasync 2 "exclude each other" $M --fsync 8 --fdatasync 8
bad $B --verify 2 "'md5' && expected crc32c" $F --bs 4k --qd 1 --verify md5
bad $B --verify 2 "value" $F --bs 4k --qd 1 --verify
bad $B --verify 2 "not with --rw randrw" $M --verify crc32c
bad $B --verify 2 "one-pass run" $F --bs 4k --qd 1 --runtime 1 --verify crc32c
W="--file $T/f64k --rw randwrite --bs 4k --qd 1 --force --verify crc32c"
bad $B --verify 2 "every block written once && --norandommap" $W --norandommap
bad $B --verify 2 "every block written once && --random-distribution" $W --random-distribution zipf:1.1
bad $B --bs 2 "at least 32 bytes with --verify" $F --bs 16 --qd 1 --verify crc32c
R="--file $T/f64k --rw randread --bs 4k --qd 1"
# (the parser's every refusal is tests/tools/test-iobench-dist.c's; here, that each
# reaches the user as one line)
for v in "" zipf: zipf:0 pareto:1 normal:101 uniform; do
	bad $B --random-distribution 2 "'$v'" $R --random-distribution "$v"
done
bad $B --random-distribution 2 "got -1 (negative)" $R --random-distribution normal:-1
bad $B --random-distribution 2 "value" $R --random-distribution
bad $B --random-distribution 2 "applies to random modes" $F --bs 4k --qd 1 --random-distribution zipf:1.2
ints $B --rate-iops 1 1000000000 $R
ints $B --nrfiles 1 256 $R
bad $B --nrfiles 2 "got 3, but 2 --file given" $R --file "$T/f64k.b" --nrfiles 3
bad $B --file 2 "$T/f64k given twice" $R --file "$T/f64k"
bad $B --file 2 "$T/f64k and $T/./f64k are the same file" $R --file "$T/./f64k"
bad $B --file 2 "empty path" $R --file ""
bad $B --file 1 "$T/f64k.0: cannot open for reading" $R --nrfiles 2
bad $B --size 2 "got 8192 bytes for 3 files, less than one block of 4096" --file "$T/new" --nrfiles 3 --rw write --bs 4k --qd 1 --size 8k
# trims discard: an existing file only with --force; nothing to verify or sync
bad $B --file 1 "exists; --rw trim would discard its blocks (pass --force)" --file "$T/f64k" --rw trim --bs 4k --qd 1
bad $B --file 1 "$T/none: cannot open" --file "$T/none" --rw randtrim --bs 4k --qd 1 --force
bad $B --verify 2 "not with --rw trim" --file "$T/f64k" --rw trim --bs 4k --qd 1 --force --verify crc32c
bad $B --fsync 2 "applies to modes that write, not randtrim" --file "$T/f64k" --rw randtrim --bs 4k --qd 1 --force --fsync 4
# a polled ring: O_DIRECT reads and writes only
bad $B --hipri 2 "needs --direct" $R --hipri
for o in "--rate 1m" "--rate-iops 10" "--log-interval 100"; do
	bad $B --hipri 2 "not with ${o%% *}" $R --direct --hipri $o
done
bad $B --hipri 2 "not with --rw trim/randtrim" --file "$T/f64k" --rw randtrim --bs 4k --qd 1 --force --direct --hipri
bad $B --hipri 2 "not with --end-fsync" --file "$T/f64k" --rw write --bs 4k --qd 1 --force --direct --hipri --end-fsync
ints $B --numjobs 1 64 $R
for v in "" "-1" "99999999999999999999"; do
	bad $B --offset 2 "'$v'" $R --offset "$v"
done
bad $B --offset 2 "value" $R --offset
bad $B --offset 1 "none at or past --offset 65536" $R --offset 64k
bad $B --offset 1 "fewer than --offset 32768 + --size 65536" $R --offset 32k --size 64k
for v in "0" "nan" "1e7"; do
	bad $B --ramp-time 2 "'$v'" $R --runtime 1 --ramp-time "$v"
done
bad $B --ramp-time 2 "needs --runtime" $R --ramp-time 1
bad $B --time-based 2 "needs --runtime" $R --time-based
bad $B --log-interval 2 "'0' && 1 && 3600000" $R --log-interval 0
bad $B --log-interval 2 "value" $R --log-interval
bad $B --log-prefix 2 "empty path" $R --log-interval 100 --log-prefix ""
bad $B --log-prefix 2 "value" $R --log-interval 100 --log-prefix
bad $B --log-prefix 1 "$T/nodir/x.job0.csv: cannot create" $R --log-interval 100 --log-prefix "$T/nodir/x"
# the log is checked before the run: never the file under test (it was truncated and
# overwritten with the CSV), never a FIFO (fopen blocked on it)
cp "$T/f64k" "$T/vict.job0.csv"
bad $B --log-prefix 1 "$T/./vict.job0.csv is the same file as --file $T/vict.job0.csv" \
	--file "$T/vict.job0.csv" --rw read --bs 4k --qd 1 --log-interval 100 --log-prefix "$T/./vict"
cmp -s "$T/f64k" "$T/vict.job0.csv" || fail "rf-iobench --log-prefix wrote over its --file"
mkfifo "$T/lf.job0.csv"
bad $B --log-prefix 1 "$T/lf.job0.csv: is a FIFO" $R --log-interval 100 --log-prefix "$T/lf"
mkdir "$T/lg.job1.csv"
bad $B --log-prefix 1 "$T/lg.job1.csv: is a directory" $R --log-interval 100 --numjobs 2 \
	--log-prefix "$T/lg"
! [ -e "$T/lg.job0.csv" ] || fail "a refused rf-iobench run left $T/lg.job0.csv"
bad $B --job 1 "$T/none.fio && cannot open" --job "$T/none.fio"
bad $B --job 2 "empty path" --job ""
bad $B --job 2 "value" --job
printf '[j]\nrw=read\n' > "$T/j.fio"
bad $B --job 2 "only --json may be added" --job "$T/j.fio" --qd 4
printf '[global]\nbs=4k\n[j]\nrw=read\nqueue=4\n' > "$T/j.fio"
bad $B --job 1 "line 5 && unknown key 'queue'" --job "$T/j.fio"
# what fio reads otherwise: refused, naming it (rf-iobench ran it differently)
printf '[j]\nrw=read\nbs=4KiB\n' > "$T/j.fio"
bad $B --job 1 "line 3 && bs=4KiB && powers of 1000" --job "$T/j.fio"
printf '[j]\nrw=read\nruntime=3\n' > "$T/j.fio"
bad $B --job 1 "line 3 && runtime without time_based && one pass" --job "$T/j.fio"
printf '[j]\nrw=read\nruntime=1.5\ntime_based=1\n' > "$T/j.fio"
bad $B --job 1 "line 3 && runtime=1.5 && 1500ms" --job "$T/j.fio"
printf '[j]\nrw\n' > "$T/j.fio"
bad $B --job 1 "line 2 && rw needs a value" --job "$T/j.fio"
printf 'rw=read\n' > "$T/j.fio"
bad $B --job 1 "line 1 && before any [section]" --job "$T/j.fio"
printf '[j\n' > "$T/j.fio"
bad $B --job 1 "line 1 && expected [section-name]" --job "$T/j.fio"
printf '[j]\ndirect=yes\n' > "$T/j.fio"
bad $B --job 1 "line 2 && direct takes no value" --job "$T/j.fio"
printf '[j]\nrw=read\0\n' > "$T/j.fio"                    # was "longer than 1022 characters"
bad $B --job 1 "line 2: a NUL byte at column 8: not a text file" --job "$T/j.fio"
{ printf '[j]\n; '; head -c 1100 /dev/zero | tr '\0' x; printf '\n'; } > "$T/j.fio"
bad $B --job 1 "line 2: longer than 1022 characters" --job "$T/j.fio"
# two jobs that log under one prefix would write one CSV: refused before either runs
printf '[global]\nfilename=%s\nrw=read\nlog_avg_msec=100\nlog_prefix=%s\n[a]\n[b]\n' \
	"$T/f64k" "$T/lp" > "$T/j.fio"
bad $B --job 1 "[b] logs to $T/lp.job0.csv, as [a] does" --job "$T/j.fio"
printf '[global]\nfilename=%s\nrw=read\nlog_avg_msec=100\n[a]\nlog_prefix=%s/lq\n[b]\nlog_prefix=%s/./lq\n' \
	"$T/f64k" "$T" "$T" > "$T/j.fio"
bad $B --job 1 "line 8: [b] logs to $T/./lq.job0.csv, as [a] does (line 6)" --job "$T/j.fio"
! [ -e "$T/lp.job0.csv" ] && ! [ -e "$T/lq.job0.csv" ] || fail "a refused --job left a log"
# a job whose log is its own job file (it was overwritten with the CSV, exit 0)
printf '[a]\nfilename=%s\nrw=read\nbs=4k\nlog_avg_msec=100\nlog_prefix=%s/jl\n' "$T/f64k" "$T" \
	> "$T/jl.job0.csv"
cp "$T/jl.job0.csv" "$T/jl.keep"
bad $B --job 1 "jl.job0.csv, the job file itself" --job "$T/jl.job0.csv"
cmp -s "$T/jl.keep" "$T/jl.job0.csv" || fail "rf-iobench wrote its log over its job file"
bad $B --job 1 "$fifo && is a FIFO" --job "$fifo"        # fopen() blocked here once
bad $B --job 1 "$T && is a directory" --job "$T"          # was "no job section"
# A job's value that its own process refuses is traced to the file, section, line and
# key it came from (the parent prints the job's [name] on stdout, so not `bad`), and
# with --json a failed job's name is a JSON string even with a quote in it.
printf '[global]\nfilename=%s\nrw=read\niodepth=4\n[a"b]\niodepth=-1\n' "$T/f64k" > "$T/j.fio"
timeout 20 "$EXE" --job "$T/j.fio" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 2 ] || fail "--job with iodepth=-1: exit $rc, want 2: $(cat "$T/err")"
for t1 in "--qd" "'-1'" "$T/j.fio" '[a"b]' "line 6" "iodepth"; do
	grep -qF -- "$t1" "$T/err" || fail "--job with iodepth=-1: stderr lacks '$t1': $(cat "$T/err")"
done
# a job's own refusal of its file (not of one option's value) names the job file, the
# section and the keys it came from (it named neither)
printf '[global]\nfilename=%s\nrw=read\nbs=4k\n[big]\noffset=1g\n' "$T/f64k" > "$T/j2.fio"
timeout 20 "$EXE" --job "$T/j2.fio" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] || fail "--job with offset=1g: exit $rc, want 1: $(cat "$T/err")"
for t1 in "$T/j2.fio" "[big]" "offset, line 6" "filename, line 2" "none at or past --offset"; do
	grep -qF -- "$t1" "$T/err" || fail "--job with offset=1g: stderr lacks '$t1': $(cat "$T/err")"
done
printf '[global]\nfilename=%s\nrw=read\n[huge]\nsize=1m\n' "$T/f64k" > "$T/j2.fio"
timeout 20 "$EXE" --job "$T/j2.fio" >"$T/out" 2>"$T/err"
for t1 in "$T/j2.fio" "[huge]" "size, line 5"; do
	grep -qF -- "$t1" "$T/err" || fail "--job with size=1m: stderr lacks '$t1': $(cat "$T/err")"
done
timeout 20 "$EXE" --job "$T/j.fio" --json >"$T/out" 2>"$T/err"
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["jobs"][0]["job"] == "a\"b" and d["jobs"][0]["failed"]' "$T/out" ||
	fail "--job --json with a failed job named a\"b: not that JSON: $(cat "$T/out")"
for v in "0" "5x" " 1m"; do
	bad $B --rate 2 "'$v'" $R --rate "$v"
done
bad $B --rate 2 "value" $R --rate
bad $B --bogus 2 "unknown" --bogus
bad $B -d 2 "-d: unknown option" $F --bs 4k --qd 1 -dy   # it named the previous argument
bad $B --direct 2 "--direct: takes no value" $F --bs 4k --qd 1 --dir=1
bad $B stray 2 "unexpected argument" $F --bs 4k --qd 1 stray
export RF_FAULT_INJECT="eio=2"   # malformed: one line, the ring's, naming the variable
bad $B RF_FAULT_INJECT 1 "eio=2 && fraction outside" $F --bs 4k --qd 1
unset RF_FAULT_INJECT
[ "$(wc -c <"$T/f64k")" -eq 65536 ] && [ -p "$fifo" ] || fail "an input was changed"

fi

# ---- rf-infer -------------------------------------------------------------------------
if [ "$WHICH" = rf-infer ]; then
I=rf-infer
mkdir -p "$T/ex"
ints $I --batch-size 1 65536 "$T/ex"
ints $I --limit 1 9223372036854775807 "$T/ex"
bad $I --device 2 "'gpu' && expected cpu or cuda" "$T/ex" --device gpu
bad $I --device 2 "needs a value" "$T/ex" --device
bad $I --data 2 "empty path" "$T/ex" --data ""
bad $I --data 2 "needs a value" "$T/ex" --data
for f in json quiet help; do
	bad $I "--$f" 2 "takes no value" "--$f=1"
done
bad $I --bogus 2 "unknown option" "$T/ex" --bogus
bad $I "export directory" 2 "expected the export directory"
bad $I "more arguments" 2 "expected one export directory" "$T/ex" "$T/ex"
bad $I DIR 2 "DIR: got '', an empty path" ""          # it looked for /model.json
bad $I -x 2 "-x: unknown option" "$T/ex" --limit 5 -xy  # it named 5
bad $I --data 2 "https is not supported" "$T/ex" --data https://h/t10k.rfrec
for u in ftp://x/y s3://b/t10k.rfrec; do
	bad $I --data 2 "'$u' && ${u%%://*} is not supported" "$T/ex" --data "$u"
done
bad $I "$T/ex/model.json" 1 "No such file" "$T/ex"
bad $I "$T/text/model.json" 1 "Not a directory" "$T/text"
mkdir "$T/ex/model.json"
bad $I "$T/ex/model.json" 1 "is a directory, expected a regular file" "$T/ex"
rmdir "$T/ex/model.json"
mkfifo "$T/ex/model.json"
bad $I "$T/ex/model.json" 1 "is a FIFO, expected a regular file" "$T/ex"
rm "$T/ex/model.json"
printf 'not json' > "$T/ex/model.json"
bad $I "$T/ex/model.json" 1 "not JSON at line 1" "$T/ex"
printf '{"format": "ringflow-export", "version": 2}' > "$T/ex/model.json"
bad $I "$T/ex/model.json" 1 "version 2" "$T/ex"
printf '{"format": "ringflow-export", "version": 1, "model": "vgg"}' > "$T/ex/model.json"
bad $I "$T/ex/model.json" 1 "model \"vgg\" && mlp|lenet|resnet18" "$T/ex"
# a value of the wrong type is named as such (was "version -1", "model (missing)")
printf '{"format": "ringflow-export", "version": "1"}' > "$T/ex/model.json"
bad $I "$T/ex/model.json" 1 "\"version\" is a string && the integer 1" "$T/ex"
printf '{"format": "ringflow-export", "version": 1, "model": 5}' > "$T/ex/model.json"
bad $I "$T/ex/model.json" 1 "\"model\" is an integer && expected a string" "$T/ex"
fi

# ---- rf-httpd (examples/) ---------------------------------------------------------------
if [ "$WHICH" = rf-httpd ]; then
H=rf-httpd
mkdir -p "$T/www"
ints $H --port 0 65535 "$T/www"
ints $H --buffers 1 32768 "$T/www"
ints $H --idle-timeout 1 86400 "$T/www"
ints $H --max-conns 1 1000000 "$T/www"
bad $H --bind 2 "'300.1.1.1' && IPv4" "$T/www" --bind 300.1.1.1
bad $H --bind 2 "needs a value" "$T/www" --bind
bad $H --help 2 "unknown option" --help=1
bad $H --bogus 2 "unknown option" "$T/www" --bogus
bad $H DIR 2 "missing DIR"
bad $H "unexpected argument" 2 "$T/www" "$T/www" "$T/www"
bad $H "$T/nope" 1 "cannot open directory" "$T/nope"
: > "$T/file"
bad $H "$T/file" 1 "cannot open directory && Not a directory" "$T/file"
# a port already taken: the listener's own error, naming address and port
python3 -c 'import socket,time,sys; s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(30)' > "$T/port" &
busy=$!
for i in 1 2 3 4 5 6 7 8 9 10; do [ -s "$T/port" ] && break; sleep 0.2; done
bad $H "127.0.0.1:$(cat "$T/port")" 1 "cannot listen" "$T/www" --port "$(cat "$T/port")"
kill -KILL $busy 2>/dev/null  # not TERM: the caller may have it ignored
fi

# --help to a stdout that cannot be written (a full disk): exit 1, saying so (it was 0)
if [ -w /dev/full ]; then
	timeout 20 "$EXE" --help >/dev/full 2>"$T/err"; rc=$?
	[ $rc = 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] &&
		grep -q "^$WHICH: stdout: No space left on device" "$T/err" ||
		fail "$WHICH --help >/dev/full: exit $rc: $(cat "$T/err")"
fi
[ -c "$dev" ] && [ -c /dev/null ] || fail "$dev or /dev/null is no longer a character device"

# ---- every option in the tool's --help has cases above ----------------------------------
opts=$("$EXE" --help | grep -o -- '--[a-z][a-z-]*' | sort -u)
[ -n "$opts" ] || fail "$WHICH --help lists no options"
for o in $opts; do
	case "$covered" in
	*" $WHICH:$o "*) ;;
	*) fail "$WHICH $o (in --help) has no bad-value case in this test" ;;
	esac
done
echo "ok: $WHICH: all $(echo $opts | wc -w) options in --help covered; $n refusals, each one line on stderr, none hung"
exit 0
