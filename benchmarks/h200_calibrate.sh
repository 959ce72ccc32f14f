#!/usr/bin/env bash
# The shipped H200 profile and its validation. Run from the repository root on the GPU:
#   OUT=some/folder bash benchmarks/h200_calibrate.sh
# Writes OUT/h200.json (the profile), OUT/calibration.csv and OUT/validation.csv (the measurements),
# OUT/validate.json (every held-out case, predicted by each model), OUT/validation-repeat.csv (the
# held-out set measured again), OUT/kernels.csv (the kernels cuBLAS ran for both sets' GEMMs: a
# CSV export does not carry calibrate's kernel census, and benchmarks/refit_profile.py --kernels
# needs it) and prints the validation table.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -m shapewise calibrate --db "$OUT/cal.db" --out "$OUT/h200.json" --no-install
echo "calibrate took $(( $(date +%s) - start )) s"
python3 -m shapewise validate --db "$OUT/val.db" --profile "$OUT/h200.json" --json > "$OUT/validate.json"
python3 -m shapewise validate --from-db --db "$OUT/val.db" --profile "$OUT/h200.json" --gpu h200
# The held-out set measured a second time: the repeat noise that bounds any prediction's error.
python3 -m shapewise validate --db "$OUT/val2.db" --profile "$OUT/h200.json" --json > /dev/null
python3 -m shapewise results --db "$OUT/cal.db" --export "$OUT/calibration.csv"
python3 -m shapewise results --db "$OUT/val.db" --export "$OUT/validation.csv"
python3 -m shapewise results --db "$OUT/val2.db" --export "$OUT/validation-repeat.csv"
python3 benchmarks/kernel_names.py "$OUT/kernels.csv"
rm -f "$OUT"/*.db "$OUT"/*.db-wal "$OUT"/*.db-shm
echo "all took $(( $(date +%s) - start )) s"
