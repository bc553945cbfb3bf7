#!/bin/sh
# test-export: rf-train --export DIR, rf-infer DIR and tools/rf-export-torch.py DIR.
# For the MLP, LeNet and ResNet-18 (short runs): rf-infer's accuracy and loss on the
# same test records equal rf-train's final ones, and the independent PyTorch reader
# (Debian's python3-torch, where installed) gets the same accuracy from the JSON and
# the parameter file alone. Then what must be refused, each with exit 1 and one line
# naming the file and what was expected: a flipped byte in params.rfck (its CRC), the
# params.rfck of another export (the hash model.json names), a model.json edited
# against the table (a kernel size, a layer kind, a tensor's shape), a model.json that
# is not JSON, a missing params.rfck; the PyTorch reader refuses the corrupt file too.
# Skips (77) without Fashion-MNIST.
# The PyTorch reader runs once for all the exports (importing torch is most of a run).
# usage: test-export.sh path/to/rf-train path/to/rf-infer path/to/rf-export-torch.py
RF=${1:?usage: $0 rf-train rf-infer rf-export-torch.py}
INF=${2:?usage}
PY=${3:?usage}
DATA=${RF_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
T=$(mktemp -d "${TMPDIR:-/tmp}/rf-export.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -e "$DATA/t10k-labels-idx1-ubyte.gz" ] || [ -e "$DATA/t10k-labels-idx1-ubyte" ] ||
	{ echo "SKIP: no Fashion-MNIST in $DATA"; exit 77; }
torch=0
/usr/bin/python3 -c 'import importlib.util as u, sys; sys.exit(not u.find_spec("torch"))' \
	2>/dev/null && torch=1
[ $torch = 1 ] || echo "note: no python3-torch: the PyTorch reader's checks are left out"

# jget FILE KEY: a number from a one-line JSON object
jget() { python3 -c 'import json,sys; print("%.6f" % json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

# roundtrip NAME TEST_LIMIT BATCH rf-train-args...
roundtrip() {
	name=$1 tl=$2 bs=$3; shift 3
	"$RF" "$@" --batch-size "$bs" --test-limit "$tl" --export "$T/$name" --json --quiet >"$T/$name.train" 2>"$T/err" ||
		fail "rf-train $* --export: $(cat "$T/err")"
	[ -f "$T/$name/model.json" ] && [ -f "$T/$name/params.rfck" ] || fail "$name: export files missing"
	ls "$T/$name" | grep -q tmp && fail "$name: a temporary file was left: $(ls "$T/$name")"
	"$INF" "$T/$name" --data "$DATA" --limit "$tl" --batch-size "$bs" --json >"$T/$name.infer" 2>"$T/err" ||
		fail "rf-infer $name: $(cat "$T/err")"
	a=$(jget "$T/$name.train" final_test_acc) b=$(jget "$T/$name.infer" accuracy)
	[ "$a" = "$b" ] || fail "$name: rf-train's test accuracy $a, rf-infer's $b"
	la=$(jget "$T/$name.train" final_test_loss) lb=$(jget "$T/$name.infer" loss)
	[ "$la" = "$lb" ] || fail "$name: rf-train's test loss $la, rf-infer's $lb"
	echo "$name $T/$name $tl" >>"$T/torch-jobs"
	echo "ok: $name: rf-train and rf-infer agree: accuracy $b"
}

# torch_all: the PyTorch reader on every export listed in $T/torch-jobs ("NAME DIR
# LIMIT"), in one interpreter (importing torch is most of a run of the reader): NAME's
# stdout, stderr and exit status in $T/NAME.torch, .torch.err and .torch.rc
torch_all() {
	/usr/bin/python3 - "$PY" "$DATA" "$T" <<'EOF'
import contextlib, importlib.util, io, sys
spec = importlib.util.spec_from_file_location("rf_export_torch", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
for line in open(sys.argv[3] + "/torch-jobs"):
    name, d, limit = line.split()
    out, err, rc = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            mod.run(["rf-export-torch.py", d, "--data", sys.argv[2], "--limit", limit, "--json"])
        except SystemExit as e:
            rc = e.code
    for ext, text in (("", out.getvalue()), (".err", err.getvalue()), (".rc", "%s\n" % rc)):
        open("%s/%s.torch%s" % (sys.argv[3], name, ext), "w").write(text)
EOF
}

nl=2000 ntl=1000
roundtrip mlp 1000 256 --model mlp --epochs 1 --limit 3000 --data "$DATA"
roundtrip lenet $ntl 256 --model lenet --epochs 1 --limit $nl --data "$DATA"
roundtrip lenet2 $ntl 256 --model lenet --epochs 1 --limit $nl --seed 7 --data "$DATA"
roundtrip resnet 16 8 --model resnet18 --epochs 1 --limit 8 --data "$DATA"

# refused FILE-IN-MESSAGE TEXT DIR: rf-infer exits 1 with one line holding both
refused() {
	"$INF" "$3" --data "$DATA" --limit 100 >"$T/out" 2>"$T/err"; rc=$?
	[ $rc = 1 ] || fail "rf-infer $3: exit $rc, want 1 ($2); stderr: $(cat "$T/err")"
	[ "$(wc -l <"$T/err")" -eq 1 ] || fail "rf-infer $3: want one stderr line: $(cat "$T/err")"
	grep -qF -- "$1" "$T/err" && grep -qF -- "$2" "$T/err" ||
		fail "rf-infer $3: stderr lacks '$1' or '$2': $(cat "$T/err")"
	[ -s "$T/out" ] && fail "rf-infer $3: printed a result: $(cat "$T/out")"
	return 0
}
copy() { rm -rf "$T/$2"; cp -r "$T/$1" "$T/$2"; }

copy lenet flip
python3 - "$T/flip/params.rfck" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[4096 + 100] ^= 0x40        # inside the first tensor's data (at 4096, after the header)
open(p, "wb").write(bytes(b))
EOF
refused "$T/flip/params.rfck" "CRC" "$T/flip"
echo "flip $T/flip 10" >>"$T/torch-jobs"
# damaged exports for the PyTorch reader: each one line and exit 1 -- they hung (a FIFO,
# /dev/zero), read a file outside the export, ran another model (input_scale 0), or
# ended in a Python traceback
if [ $torch = 1 ]; then
	copy lenet tfifo; rm "$T/tfifo/params.rfck"; mkfifo "$T/tfifo/params.rfck"
	copy lenet tzero; rm "$T/tzero/params.rfck"; ln -s /dev/zero "$T/tzero/params.rfck"
	for v in path scale empty array version deep; do copy lenet "t$v"; done
	python3 - "$T" <<'EOF'
import json, sys
T = sys.argv[1]
def edit(name, fn):
    p = "%s/t%s/model.json" % (T, name)
    m = json.load(open(p))
    out = fn(m)
    open(p, "w").write(out if isinstance(out, str) else json.dumps(m))
edit("path", lambda m: m.update(params_file="../lenet/params.rfck"))
edit("scale", lambda m: m.update(input_scale=0))
edit("empty", lambda m: m.update(layers=[]))
edit("array", lambda m: "[1, 2, 3]")
edit("version", lambda m: m.update(version=1.0))
edit("deep", lambda m: "[" * 100000 + "]" * 100000)
EOF
	for v in fifo zero path scale empty array version deep; do
		echo "t$v $T/t$v 10" >>"$T/torch-jobs"
	done
fi
if [ $torch = 1 ]; then
	torch_all || fail "the PyTorch reader's run"
	for name in mlp lenet lenet2 resnet; do
		[ -e "$T/$name.train" ] || continue
		[ "$(cat "$T/$name.torch.rc")" = 0 ] ||
			fail "rf-export-torch $name: $(cat "$T/$name.torch.err")"
		b=$(jget "$T/$name.infer" accuracy) la=$(jget "$T/$name.train" final_test_loss)
		c=$(jget "$T/$name.torch" accuracy) l=$(jget "$T/$name.torch" loss)
		[ "$c" = "$b" ] || fail "$name: PyTorch's accuracy $c, rf-infer's $b"
		python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-4 * max(1, abs(b)))" "$l" "$la" ||
			fail "$name: PyTorch's loss $l, ours $la (beyond 1e-4 relative)"
		echo "ok: $name: PyTorch's reader agrees: accuracy $c, loss $l"
	done
	[ "$(cat "$T/flip.torch.rc")" = 1 ] || fail "rf-export-torch took a corrupt file"
	grep -q "CRC" "$T/flip.torch.err" || fail "rf-export-torch on a corrupt file: $(cat "$T/flip.torch.err")"
	for v in "fifo:not a regular file" "zero:not a regular file" "path:params_file" \
		 "scale:input_scale 0" "empty:layers []" "array:expected a JSON object" \
		 "version:version 1" "deep:not a well-formed export"; do
		n=t${v%%:*} want=${v#*:}
		[ "$(cat "$T/$n.torch.rc")" = 1 ] && [ "$(wc -l <"$T/$n.torch.err")" = 1 ] &&
			grep -qF -- "$want" "$T/$n.torch.err" ||
			fail "rf-export-torch on $n: exit $(cat "$T/$n.torch.rc"), want 1 and one line with '$want': $(head -c 600 "$T/$n.torch.err")"
	done
	echo "ok: rf-export-torch refuses 8 damaged exports with one line each"
fi
copy lenet swap
cp "$T/lenet2/params.rfck" "$T/swap/params.rfck"
refused "$T/swap/params.rfck" "not of one export" "$T/swap"
copy lenet k
sed -i '0,/"k": 3/s//"k": 5/' "$T/k/model.json"
refused "$T/k/model.json" "layers[0].k is 5, the lenet table has 3" "$T/k"
copy lenet kind
sed -i '0,/"kind": "relu"/s//"kind": "maxpool"/' "$T/kind/model.json"
refused "$T/kind/model.json" 'layers[1].kind is "maxpool", the lenet table has "relu"' "$T/kind"
copy mlp shape
python3 - "$T/shape/model.json" <<'EOF'
import json, sys
p = sys.argv[1]
m = json.load(open(p))
m["tensors"][0]["shape"] = [128, 784]
json.dump(m, open(p, "w"))
EOF
refused "$T/shape/model.json" "tensors[0] (w1): the shape is not the table's" "$T/shape"
copy lenet eps
sed -i 's/"eps": 1.0000000000000001e-5/"eps": 0.1/' "$T/eps/model.json"
refused "$T/eps/model.json" "batchnorm: expected eps 1e-05" "$T/eps"
copy lenet pnames
sed -i '0,/"c1.w",/s//"c1.b",/' "$T/pnames/model.json"
refused "$T/pnames/model.json" "layers[0].params" "$T/pnames"
copy mlp trunc
head -c 200 "$T/mlp/model.json" > "$T/trunc/model.json"
refused "$T/trunc/model.json" "not JSON at line" "$T/trunc"
copy mlp nop
rm "$T/nop/params.rfck"
refused "$T/nop/params.rfck" "no such checkpoint file" "$T/nop"
# the loss: the one ringflow computes, or refused naming the file and the key (any
# value was taken, and the loss reported was softmax cross-entropy's whatever it said)
for v in '"x"' '"mse"' '3' 'null'; do
	copy mlp loss
	sed -i "s/\"loss\": \"softmax_cross_entropy\"/\"loss\": $v/" "$T/loss/model.json"
	grep -q "\"loss\": $v" "$T/loss/model.json" || fail "the edit of loss to $v"
	refused "$T/loss/model.json" 'expected "softmax_cross_entropy"' "$T/loss"
	grep -q "model.json: loss" "$T/err" || fail "loss $v: the key is not named: $(cat "$T/err")"
done
# class_names (rf-train writes them where the data name their classes): optional; given,
# one string of 1 to 4095 bytes per class; data without names (IDX) are not compared
setnames() {
	python3 - "$T/cn/model.json" "$1" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1])); m["class_names"] = json.loads(sys.argv[2])
json.dump(m, open(sys.argv[1], "w"))
EOF
}
long=$(head -c 4096 /dev/zero | tr '\0' x)
for v in '"abc"' '["a"]' '[1,2,3,4,5,6,7,8,9,10]' '["","b","c","d","e","f","g","h","i","j"]' \
	 "[\"$long\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\"]"; do
	copy mlp cn
	setnames "$v" || fail "class_names $v"
	refused "$T/cn/model.json" "class_names" "$T/cn"
done
copy mlp cn
setnames '["T-shirt","Trouser","Pullover","Dress","Coat","Sandal","Shirt","Sneaker","Bag","Boot"]'
"$INF" "$T/cn" --data "$DATA" --limit 100 >"$T/out" 2>"$T/err" || fail "class_names, IDX data: $(cat "$T/err")"
echo "ok: a flipped byte, another export's parameters, edited and truncated JSON and a missing file are refused"
# rf-infer evaluates the t10k set only: a directory holding just its two files is
# enough (it was refused for the missing training files), with the same result
mkdir "$T/t10k"
for f in t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
	for e in "" .gz; do
		[ -e "$DATA/$f$e" ] && ln -s "$DATA/$f$e" "$T/t10k/$f$e"
	done
done
"$INF" "$T/mlp" --data "$T/t10k" --limit 1000 --json >"$T/t10k.j" 2>"$T/err" ||
	fail "rf-infer on a directory of the t10k files only: $(cat "$T/err")"
[ "$(jget "$T/t10k.j" accuracy)" = "$(jget "$T/mlp.infer" accuracy)" ] ||
	fail "rf-infer on the t10k files only: accuracy $(jget "$T/t10k.j" accuracy), with the whole set $(jget "$T/mlp.infer" accuracy)"
echo "ok: rf-infer needs only the t10k files"
# RF_TRACE is written when rf-infer ends: checked before it starts, as rf-train's
for rt in /dev/full "$T/no-such-dir/t.json" "$T"; do
	RF_TRACE=$rt "$INF" "$T/mlp" --data "$DATA" --limit 100 >"$T/out" 2>"$T/err"; rc=$?
	[ $rc = 1 ] && [ ! -s "$T/out" ] && grep -q "^rf-infer: RF_TRACE $rt: " "$T/err" ||
		fail "rf-infer with RF_TRACE=$rt: exit $rc: $(cat "$T/err" "$T/out")"
done
# images for a Fashion-MNIST model: rf-infer has no --image-size, and says what the
# model takes (it said "or give --image-size")
python3 - "$T/shard.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.USTAR_FORMAT) as t:
    for name, data in (("a.jpg", b"\xff\xd8 not really"), ("a.cls", b"1\n")):
        i = tarfile.TarInfo(name); i.size = len(data); t.addfile(i, io.BytesIO(data))
EOF
"$INF" "$T/mlp" --data "$T/shard.tar" >"$T/out" 2>"$T/err"; rc=$?
[ $rc = 1 ] && grep -q "shard.tar: .*expected 28x28 images, the input of this model" "$T/err" &&
	! grep -q -- "--image-size to" "$T/err" ||
	fail "rf-infer of a Fashion-MNIST model on a shard: exit $rc: $(cat "$T/err")"
echo "ok: RF_TRACE checked before rf-infer runs; images for a 28x28 model: $(cat "$T/err")"
# JSON has no NaN: weights blown up in the last step (--lr 1e6 --wd 10) give a loss
# that overflows on the test set; rf-infer's --json says null (it printed -nan)
"$RF" --data "$DATA" --limit 768 --epochs 1 --lr 1e6 --wd 10 --no-eval --quiet \
	--export "$T/blown" >/dev/null 2>"$T/err" || fail "rf-train --lr 1e6 --wd 10: $(cat "$T/err")"
"$INF" "$T/blown" --data "$DATA" --limit 1000 --json >"$T/blown.j" 2>"$T/err" ||
	fail "rf-infer of the blown-up export: $(cat "$T/err")"
python3 -c 'import json,sys
def no(c): raise ValueError("JSON has no " + c)
d = json.loads(open(sys.argv[1]).read(), parse_constant=no)
assert d["loss"] is None, d["loss"]' "$T/blown.j" || fail "rf-infer --json of a NaN loss: $(cat "$T/blown.j")"
echo "ok: rf-infer --json: a NaN loss is null"
