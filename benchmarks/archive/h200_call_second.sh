# One device call: the wide set's seed 25 again on another H200, `calibrate --quick` first (the second
# machine of the third freeze's figures).   bash benchmarks/archive/h200_call_second.sh   (OUT set by the caller)
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
OUT=$OUT WIDE="25" QUICK_CALIBRATE=1 CONFIGS=tests/data/hf BUDGET_S=170 timeout 200 bash benchmarks/h200_judges.sh > "$OUT/log.txt" 2>&1
grep -E "runs|took" "$OUT/log.txt"
rm -f "$OUT"/judges.db*; gzip "$OUT/judges.csv" "$OUT/h200-machine.json" "$OUT/kernels.csv"
