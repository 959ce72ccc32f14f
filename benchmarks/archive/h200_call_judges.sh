# One device call: `calibrate --quick`, fresh judge seeds (wide 25, 26; attention 23; models 6 over the corpus) and the
# variants set's seed 2, drawn after the third freeze; the stores dropped and the export gzipped so
# that every file comes back.   bash benchmarks/archive/h200_call_judges.sh   (OUT set by the caller)
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
mkdir -p "$OUT/judges" "$OUT/variants"
OUT=$OUT/judges WIDE="25 26" ATTENTION="23" MODELS="6" CONFIGS=tests/data/hf BUDGET_S=320 QUICK_CALIBRATE=1 \
  timeout 340 bash benchmarks/h200_judges.sh > "$OUT/judges/log.txt" 2>&1
tail -2 "$OUT/judges/log.txt"
rm -f "$OUT"/judges/judges.db*; gzip "$OUT/judges/judges.csv" "$OUT/judges/kernels.csv"
OUT=$OUT/variants SEED=2 LIMIT_S=200 bash benchmarks/h200_variants.sh > /dev/null 2>&1
tail -1 "$OUT/variants/log.txt"
