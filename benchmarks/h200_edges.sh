#!/usr/bin/env bash
# The random draws of `calibrate --edges SEED` (or --batched/--large/--skinny/--streams SEED, with KIND=that name) measured on an
# H200, and the kernels each GEMM ran, without the designed set (already in results/h200-calibration/):
# refit_profile.py takes the export and the kernel CSV beside the calibration's own. Writes
# OUT/calibration-KIND-SEED.csv, OUT/kernels-KIND-SEED.csv, OUT/gpu.txt (which H200) and prints the
# sweep's summary and the time taken.
#   OUT=folder SEED=1 [KIND=edges|batched|large|skinny|streams] bash benchmarks/h200_edges.sh
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
start=$(date +%s)
seed=${SEED:-1}
kind=${KIND:-edges}
db="$OUT/$kind.db"
nvidia-smi --query-gpu=name,serial,uuid,driver_version,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"
python3 - "$db" "$seed" "$kind" <<'PY'
import sys
from shapewise.bench import sweep
from shapewise.draws import drawn_beside
from shapewise.store import Store
with Store(sys.argv[1]) as store:
    print(sweep(drawn_beside(**{sys.argv[3]: int(sys.argv[2])}), store=store, progress=False).summary())
PY
echo "measured: $(( $(date +%s) - start )) s"
timeout 300 python3 benchmarks/kernel_names.py "$OUT/kernels-$kind-$seed.csv" --db "$db" --held-out-only --seeds --"$kind" "$seed"
python3 -m shapewise results --db "$db" --export "$OUT/calibration-$kind-$seed.csv"
echo "all took $(( $(date +%s) - start )) s"
