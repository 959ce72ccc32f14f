#!/usr/bin/env bash
# One device call (issue 17, fifth freeze): each case measured from a settled GPU (bench.sweep's
# pause, measure.settle_ms). The context probe with the settled sweep beside idle and back-to-back
# GEMMs; the designed set and the large draws 1 and 2 measured again, settled. Gzipped into $OUT.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
start=$(date +%s)
nvidia-smi --query-gpu=name,serial,uuid,driver_version,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"
python3 benchmarks/archive/context_probe.py "$OUT/context-settled.json" 120 idle gemms settled idle2 2>&1 | grep -v warning
gzip "$OUT/context-settled.json"
echo "probe: $(( $(date +%s) - start )) s"
python3 - "$OUT" <<'PY'
import sys, time
from shapewise.bench import sweep
from shapewise.draws import calibration_cases, drawn_beside
from shapewise.store import Store
out = sys.argv[1]
for name, cases in (("designed", calibration_cases()), ("large-1", drawn_beside(large=1)), ("large-2", drawn_beside(large=2))):
    start = time.time()
    with Store(f"{out}/{name}.db") as store:
        print(name, sweep(cases, store=store, progress=False).summary(), f"{time.time() - start:.0f} s", flush=True)
        store.export(f"{out}/settled-{name}.csv")
PY
gzip "$OUT"/settled-*.csv
rm -f "$OUT"/*.db*
echo "all took $(( $(date +%s) - start )) s"
