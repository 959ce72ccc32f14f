set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
mkdir -p $OUT/edges3 $OUT/batched1 $OUT/copy
(OUT=$OUT/edges3 SEED=3 KIND=edges timeout 200 bash benchmarks/h200_edges.sh > $OUT/edges3/log.txt 2>&1; tail -3 $OUT/edges3/log.txt)
(OUT=$OUT/batched1 SEED=1 KIND=batched timeout 240 bash benchmarks/h200_edges.sh > $OUT/batched1/log.txt 2>&1; tail -3 $OUT/batched1/log.txt)
timeout 60 python3 - $OUT/copy/copy.db <<'PY'
import sys
from shapewise.bench import sweep
from shapewise.calibrate import calibration_cases
from shapewise.store import Store
with Store(sys.argv[1]) as store:
    print(sweep([c for c in calibration_cases() if c.params.get("family") == "copy"], store=store, progress=False).summary())
PY
python3 -m shapewise results --db $OUT/copy/copy.db --export $OUT/copy/calibration-copy.csv
rm -f $OUT/*/*.db
timeout 150 python3 benchmarks/archive/sustained_probe.py $OUT/sustained.json 2>&1 | tail -30
