#!/usr/bin/env bash
# Extended calibration runs for the H200 profile (`shapewise calibrate --extended SEED`: the designed set
# and 3600 random GEMMs and batched GEMMs more, drawn with SEED), the kernels cuBLAS ran for them, and
# fresh held-out sets measured on the same GPU. Run from the repository root on the GPU:
#   OUT=some/folder EXTENDED="1" SEEDS="13 14 15" bash benchmarks/h200_extended.sh
# Several extended seeds share one store, so the designed set is measured once. Writes
# OUT/calibration-extended.csv (every measurement), OUT/kernels-extended-SEED.csv (benchmarks/
# kernel_names.py's census of each extended set, and of the held-out sets), OUT/h200-extended.json
# (the profile the last calibrate fitted) and OUT/validation-seedS.csv for each held-out seed. The
# shipped profile is refitted from the exports by benchmarks/refit_profile.py (benchmarks/RESULTS.md
# has the command).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
start=$(date +%s)
for extended in ${EXTENDED:-1}; do
    python3 -m shapewise calibrate --extended "$extended" --db "$OUT/cal.db" --out "$OUT/h200-extended.json" --no-install
    echo "calibrate --extended $extended: $(( $(date +%s) - start )) s from the start"
    # shellcheck disable=SC2086
    python3 benchmarks/kernel_names.py "$OUT/kernels-extended-$extended.csv" --db "$OUT/cal.db" --extended "$extended" \
        --seeds ${SEEDS:-}
    python3 -m shapewise results --db "$OUT/cal.db" --export "$OUT/calibration-extended.csv"
done
for seed in ${SEEDS:-}; do
    step=$(date +%s)
    python3 -m shapewise validate --seed "$seed" --db "$OUT/val$seed.db" --profile "$OUT/h200-extended.json" \
        --json > /dev/null
    python3 -m shapewise results --db "$OUT/val$seed.db" --export "$OUT/validation-seed$seed.csv"
    echo "seed $seed took $(( $(date +%s) - step )) s"
done
rm -f "$OUT"/*.db "$OUT"/*.db-wal "$OUT"/*.db-shm
echo "all took $(( $(date +%s) - start )) s"
