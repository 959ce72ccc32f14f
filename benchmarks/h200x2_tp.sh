#!/usr/bin/env bash
# Issue 7's GPU half, for a machine with two H200s (not yet run: no two-GPU time was left when it was
# written). Run from the repository root: OUT=some/folder bash benchmarks/h200x2_tp.sh
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0), as the machine's rules ask.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
db="$OUT/tp.db"
run() { torchrun --standalone --nproc-per-node 2 -m shapewise "$@"; }
# Collectives: nccl-tests' bus bandwidth, then the link's parameters fitted into the H200 profile.
run bench comm --sizes 1M:2G --db "$db" > "$OUT/comm.txt"
run calibrate --comm --gpu h200 --no-install --out "$OUT/h200-with-link.json" --db "$db" > "$OUT/calibrate-comm.txt"
# One layer at t=2 against its prediction (collectives included), for three model styles.
for model in gpt3-2.7b llama2-7b pythia-2.8b; do
  run bench layer "$model" --tp 2 --batch 4 --seq 2048 --gpu h200 --db "$db" > "$OUT/layer-tp2-$model.txt"
done
python3 -m shapewise results --db "$db" --export "$OUT/tp.csv"
tail -n 5 "$OUT"/*.txt
