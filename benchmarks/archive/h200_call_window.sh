# One device call: the designed set's sliding-window attention cases (FlexAttention, compiled), the
# window ops of the models set's seed 6 (seen) measured again as windows, and a fresh models seed 7
# over the corpus, drawn after the window pricing was frozen.
#   bash benchmarks/archive/h200_call_window.sh   (OUT set by the caller)
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
mkdir -p "$OUT/window" "$OUT/judges"
start=$(date +%s)
timeout 300 python3 - "$OUT/window/window.db" <<'PY' 2>&1 | grep -v -i warn | tail -4
import sys
from shapewise.bench import sweep
from shapewise.calibrate import calibration_cases
from shapewise.judges import judge_set_cases
from shapewise.store import Store
designed = [c for c in calibration_cases() if c.params.get("window")]
seen = [c for c in judge_set_cases("models", seed=6, configs=["tests/data/hf"]).cases if c.params.get("window")]
with Store(sys.argv[1]) as store:
    print(len(designed), "designed:", sweep(designed, store=store, progress=False).summary())
    print(len(seen), "of models seed 6:", sweep(seen, store=store, progress=False).summary())
PY
echo "windows: $(( $(date +%s) - start )) s"
python3 -m shapewise results --db "$OUT/window/window.db" --export "$OUT/window/calibration-window.csv" > /dev/null
rm -f "$OUT"/window/window.db*
OUT=$OUT/judges MODELS="7" CONFIGS=tests/data/hf BUDGET_S=300 timeout 320 bash benchmarks/h200_judges.sh > "$OUT/judges/log.txt" 2>&1
tail -1 "$OUT/judges/log.txt"
rm -f "$OUT"/judges/judges.db*; gzip "$OUT/judges/judges.csv"
