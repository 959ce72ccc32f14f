#!/usr/bin/env bash
# One device call: calibrate's random draws measured on an H200 (settled, as every sweep is), each
# exported on its own, then the kernels each GEMM ran named within what is left of the call, gzipped
# into $OUT, for benchmarks/refit_profile.py. DRAWS names them as flag:seed (the draws of
# `calibrate --heads 1` and `--rows 2`: DRAWS="heads:1 rows:2"); GEMMLESS lists the draws with no GEMM
# to name (fused attention, memory-bound ops). Run from the repository root on the GPU:
#   OUT=some/folder DRAWS="heads:1 heads:2" [BUDGET_S=560] bash benchmarks/h200_draws.sh > some/folder/log.txt
# (OUT/draws.tar holds the exports, the kernels and gpu.txt).
# (benchmarks/archive/h200_call_skinny.sh measured the skinny and streams draws the same way.)
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
start=$(date +%s)
gemmless=" ${GEMMLESS:-heads rows} "
nvidia-smi --query-gpu=name,serial,uuid,driver_version,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"
for draw in $DRAWS; do
    kind=${draw%%:*} seed=${draw##*:}
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
for draw in $DRAWS; do
    kind=${draw%%:*} seed=${draw##*:}
    [[ "$gemmless" == *" $kind "* ]] && continue
    left=$(( ${BUDGET_S:-560} - ($(date +%s) - start) ))
    [ "$left" -gt 30 ] || { echo "no time left to name $kind $seed's kernels"; continue; }
    timeout "$left" python3 benchmarks/kernel_names.py "$OUT/kernels-$kind-$seed.csv" \
        --db "$OUT/$kind-$seed.db" --held-out-only --seeds --"$kind" "$seed" || echo "$kind $seed's kernels: cut short"
    [ -f "$OUT/kernels-$kind-$seed.csv" ] && gzip "$OUT/kernels-$kind-$seed.csv"
done
rm -f "$OUT"/*.db "$OUT"/*.db-wal "$OUT"/*.db-shm
echo "all took $(( $(date +%s) - start )) s"
# A device call brings back 8 files at most: everything in one tar (the log last written before it).
(cd "$OUT" && shopt -s nullglob && files=(calibration-*.csv.gz kernels-*.csv.gz) && tar cf draws.tar "${files[@]}" gpu.txt \
    && rm -f "${files[@]}")
