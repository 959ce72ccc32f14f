#!/usr/bin/env bash
# One device call (issue 17, fifth freeze): the large draws of `calibrate --large 1` and `--large 2`
# measured on an H200 with the kernels each ran (benchmarks/h200_edges.sh), gzipped into $OUT.
set -uo pipefail
for seed in 1 2; do
    mkdir -p "$OUT/run$seed"
    OUT="$OUT/run$seed" SEED=$seed KIND=large bash benchmarks/h200_edges.sh
    gzip -c "$OUT/run$seed/calibration-large-$seed.csv" > "$OUT/calibration-large-$seed.csv.gz"
    gzip -c "$OUT/run$seed/kernels-large-$seed.csv" > "$OUT/kernels-large-$seed.csv.gz"
    cp "$OUT/run$seed/gpu.txt" "$OUT/gpu.txt"
    rm -rf "$OUT/run$seed"
done
