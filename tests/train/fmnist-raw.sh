# tests/train/fmnist-raw.sh -- sourced by the rf-train test scripts.
# fmnist_raw DIR: the four Fashion-MNIST IDX files, uncompressed, into DIR (the loader
# then reads them through the ring): links to DATA's where it has them raw (the build's
# tests/fashion-mnist does), else inflated; exits 77 (skip) where the dataset is missing.
# Needs DATA (the dataset directory) and fail() from the caller.
fmnist_raw() {
	for n in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
		 t10k-labels-idx1-ubyte; do
		if [ -f "$DATA/$n" ]; then
			ln -s "$(cd "$DATA" && pwd)/$n" "$1/$n" || fail "link $n"
		elif [ -f "$DATA/$n.gz" ]; then
			gzip -dc "$DATA/$n.gz" >"$1/$n" || fail "gunzip $n.gz"
		else
			echo "SKIP: Fashion-MNIST not found in $DATA"
			exit 77
		fi
	done
}
