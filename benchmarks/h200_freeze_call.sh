#!/usr/bin/env bash
# One device call for a freeze: calibrate's draws named in DRAWS measured (benchmarks/h200_draws.sh,
# into OUT/d/), then validate's independent sets on fresh seeds (benchmarks/h200_judges.sh, into OUT/j/)
# measured blind: their figures printed here are the shipped profile's, and the profile refitted on
# the draws is judged on them afterwards, on the CPU, without changing anything after seeing them.
# Stops at once on a GPU that is not an H200 (its times are no H200's).
#   OUT=folder DRAWS="prefill:1 prefill:2" WIDE=37 ATTENTION=32 MODELS=19 bash benchmarks/h200_freeze_call.sh
set -uo pipefail
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$name" in *H200*) ;; *) echo "not an H200 ($name): nothing measured"; exit 3 ;; esac
mkdir -p "$OUT/d" "$OUT/j"
OUT="$OUT/d" BUDGET_S=${DRAWS_S:-170} bash benchmarks/h200_draws.sh > "$OUT/d/log.txt" 2>&1
tail -4 "$OUT/d/log.txt"; rm -f "$OUT/d/gpu.txt"  # in draws.tar: a call brings back 8 files at most
OUT="$OUT/j" CONFIGS=${CONFIGS:-tests/data/hf} MODELS_S=${MODELS_S:-230} BUDGET_S=${JUDGES_S:-400} \
    bash benchmarks/h200_judges.sh > "$OUT/j/log.txt" 2>&1
tail -4 "$OUT/j/log.txt"
rm -f "$OUT/j/judges.db" "$OUT/j/judges.db-wal" "$OUT/j/judges.db-shm"
gzip -f "$OUT/j/judges.csv"
