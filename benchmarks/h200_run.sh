#!/usr/bin/env bash
# The H200 measurements committed in benchmarks/results/: the paper's effects as they stand on an
# H200, measured through `shapewise bench` into one results store, then exported; and the timing
# harness comparison. Run from the repository root on a GPU machine:
#   OUT=some/folder bash benchmarks/h200_run.sh
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
db="$OUT/h200.db"
log="$OUT/logs"
mkdir -p "$log"
# 10 ms of warm-up and 40 ms of repetitions per case: the budgets these results were measured with.
sw() { python3 -m shapewise "$@" --db "$db" --warmup-ms 10 --budget-ms 40; }

# GEMM throughput against n at a fine step (m = k = 8192), and misaligned neighbours of 4096.
sw bench gemm -m 8192 -n 64:8192:64 -k 8192 > "$log/gemm-nsweep.txt"
sw bench gemm -m 8192 -n 4088:4104 -k 8192 --layout nn nt tn > "$log/gemm-align.txt"
# Vocabulary sizes in the logit GEMM (8192 tokens; nt, as F.linear runs it).
sw bench gemm -m 8192 -n 32000 32001 50257 50304 50400 50432 151643 151936 -k 2560 4096 --layout nt > "$log/gemm-vocab.txt"
# Attention BMMs across head dims (b·a = 128, s = 2048): the score and the product with V.
sw bench bmm -b 128 -m 2048 -n 2048 -k 64 80 96 128 160 256 --layout nt > "$log/bmm-attention.txt"
sw bench bmm -b 128 -m 2048 -n 64 80 96 128 160 256 -k 2048 >> "$log/bmm-attention.txt"
# Fused attention across head dims, every backend and the unfused path.
sw bench attention --heads 32 --head-dim 64 80 96 128 160 192 256 --seq 2048 --batch 4 \
  --backend default flash cudnn unfused > "$log/attention.txt"
# One layer across head counts at fixed hidden size, each op of it timed alone too.
for c in benchmarks/configs/gpt-h*.json; do
  sw bench layer --config "$c" --batch 4 --seq 2048 > "$log/layer-$(basename "$c" .json).txt"
done
# Every op of a step, measured beside its prediction.
sw bench ops gpt2 --batch 4 --seq 2048 > "$log/ops-gpt2.txt"
sw bench ops llama3-8b --batch 1 --seq 4096 > "$log/ops-llama3-8b.txt"
python3 -m shapewise results --db "$db" --export "$OUT/h200-results.csv"
python3 -m shapewise results --db "$db" > "$OUT/summary.json"
# The paper's timing method against shapewise's timer (SKIP_HARNESS=1 leaves it out).
if [ -z "${SKIP_HARNESS:-}" ]; then
  python3 benchmarks/archive/harness_compare.py --out "$OUT" > "$OUT/harness.txt"
  tail -n 8 "$OUT/harness.txt"
fi
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -r "$log" "$db" "$db"-wal "$db"-shm 2>/dev/null
ls -la "$OUT"
