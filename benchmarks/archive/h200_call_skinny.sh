#!/usr/bin/env bash
# One device call (issue 17, sixth freeze): the skinny draws of `calibrate --skinny 1` and `--skinny 2`
# measured on an H200 (settled, as every sweep is), exported first, then the kernels each GEMM ran
# named within what is left of the call, gzipped into $OUT.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
start=$(date +%s)
nvidia-smi --query-gpu=name,serial,uuid,driver_version,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"
for seed in 1 2; do
    python3 - "$OUT/skinny-$seed.db" "$seed" <<'PY'
import sys, time
from shapewise.bench import sweep
from shapewise.draws import drawn_beside
from shapewise.store import Store
t = time.time()
with Store(sys.argv[1]) as store:
    print(sweep(drawn_beside(skinny=int(sys.argv[2])), store=store, progress=False).summary())
print(f"skinny {sys.argv[2]} measured in {time.time() - t:.0f} s")
PY
    python3 -m shapewise results --db "$OUT/skinny-$seed.db" --export "$OUT/calibration-skinny-$seed.csv"
    gzip "$OUT/calibration-skinny-$seed.csv"
done
for seed in 1 2; do
    left=$(( ${BUDGET_S:-560} - ($(date +%s) - start) ))
    [ "$left" -gt 30 ] || { echo "no time left to name seed $seed's kernels"; continue; }
    timeout $(( left / (3 - seed) )) python3 benchmarks/kernel_names.py "$OUT/kernels-skinny-$seed.csv" \
        --db "$OUT/skinny-$seed.db" --held-out-only --seeds --skinny "$seed" || echo "seed $seed's kernels: cut short"
    [ -f "$OUT/kernels-skinny-$seed.csv" ] && gzip "$OUT/kernels-skinny-$seed.csv"
done
rm -f "$OUT"/*.db
echo "all took $(( $(date +%s) - start )) s"
