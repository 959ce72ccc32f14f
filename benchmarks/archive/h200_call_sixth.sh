#!/usr/bin/env bash
# One device call after the sixth freeze (issue 17), on another H200 than the first judge run's:
# `calibrate --quick` and the wide set's seed 28 again (the same cases on a second machine), then the
# variants set's seed 4; stores dropped, exports gzipped, so that every file comes back.
#   bash benchmarks/archive/h200_call_sixth.sh   (OUT set by the caller)
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
mkdir -p "$OUT/judges" "$OUT/variants"
OUT=$OUT/judges WIDE="28" CONFIGS=tests/data/hf BUDGET_S=300 QUICK_CALIBRATE=1 \
  timeout 320 bash benchmarks/h200_judges.sh > "$OUT/judges/log.txt" 2>&1
tail -3 "$OUT/judges/log.txt"
rm -f "$OUT"/judges/judges.db*; gzip "$OUT/judges/judges.csv" "$OUT/judges/h200-machine.json"
rm -f "$OUT/judges/kernels.csv"
OUT=$OUT/variants SEED=4 LIMIT_S=225 bash benchmarks/h200_variants.sh > /dev/null 2>&1
tail -1 "$OUT/variants/log.txt"; cat "$OUT/variants/summary.txt" | tail -25
