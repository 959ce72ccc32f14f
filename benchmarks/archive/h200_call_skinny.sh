#!/usr/bin/env bash
# One device call (issue 17, sixth freeze): the skinny draws of `calibrate --skinny 1` and `--skinny 2`
# measured on an H200 (settled, as every sweep is), exported first, then the kernels each GEMM ran
# named within what is left of the call, gzipped into $OUT. KIND=streams measured the streams draws
# the same way (the eighth freeze).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
start=$(date +%s)
kind=${KIND:-skinny}
nvidia-smi --query-gpu=name,serial,uuid,driver_version,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"
for seed in 1 2; do
    python3 - "$OUT/$kind-$seed.db" "$seed" "$kind" <<'PY'
import sys, time
from shapewise.bench import sweep
from shapewise.draws import drawn_beside
from shapewise.store import Store
t = time.time()
with Store(sys.argv[1]) as store:
    print(sweep(drawn_beside(**{sys.argv[3]: int(sys.argv[2])}), store=store, progress=False).summary())
print(f"{sys.argv[3]} {sys.argv[2]} measured in {time.time() - t:.0f} s")
PY
    python3 -m shapewise results --db "$OUT/$kind-$seed.db" --export "$OUT/calibration-$kind-$seed.csv"
    gzip "$OUT/calibration-$kind-$seed.csv"
done
for seed in 1 2; do
    left=$(( ${BUDGET_S:-560} - ($(date +%s) - start) ))
    [ "$left" -gt 30 ] || { echo "no time left to name seed $seed's kernels"; continue; }
    timeout $(( left / (3 - seed) )) python3 benchmarks/kernel_names.py "$OUT/kernels-$kind-$seed.csv" \
        --db "$OUT/$kind-$seed.db" --held-out-only --seeds --"$kind" "$seed" || echo "seed $seed's kernels: cut short"
    [ -f "$OUT/kernels-$kind-$seed.csv" ] && gzip "$OUT/kernels-$kind-$seed.csv"
done
rm -f "$OUT"/*.db
echo "all took $(( $(date +%s) - start )) s"
