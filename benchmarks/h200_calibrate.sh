#!/usr/bin/env bash
# One calibration run for the H200 profile, and its validation. The shipped profile averages six
# runs' exports, two of them extended (benchmarks/h200_extended.sh; all in
# benchmarks/results/h200-calibration/calibration*.csv.gz, refitted by benchmarks/refit_profile.py:
# benchmarks/RESULTS.md has the command). Run from the repository root on the GPU:
#   OUT=some/folder bash benchmarks/h200_calibrate.sh
# Writes OUT/h200.json (the profile), OUT/calibration.csv and OUT/validation.csv (the measurements),
# OUT/validate.json (every held-out case, predicted by each model), OUT/validation-repeat.csv (the
# held-out set measured again), OUT/validation-seed3.csv and OUT/validate-seed3.json (a second
# held-out set, drawn with another seed), OUT/kernels.csv (the kernels cuBLAS ran for the
# calibration and validation sets' GEMMs: a CSV export does not carry calibrate's kernel census, and
# benchmarks/refit_profile.py --kernels needs it) and prints the validation table.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
start=$(date +%s)
python3 -m shapewise calibrate --db "$OUT/cal.db" --out "$OUT/h200.json" --no-install
echo "calibrate took $(( $(date +%s) - start )) s"
python3 -m shapewise results --db "$OUT/cal.db" --export "$OUT/calibration.csv"
python3 -m shapewise validate --db "$OUT/val.db" --profile "$OUT/h200.json" --json > "$OUT/validate.json"
python3 -m shapewise validate --from-db --db "$OUT/val.db" --profile "$OUT/h200.json" --gpu h200
python3 -m shapewise results --db "$OUT/val.db" --export "$OUT/validation.csv"
python3 benchmarks/kernel_names.py "$OUT/kernels.csv" --db "$OUT/cal.db"  # calibrate named its own set's already
# The held-out set measured a second time: the repeat noise that bounds any prediction's error.
python3 -m shapewise validate --db "$OUT/val2.db" --profile "$OUT/h200.json" --json > /dev/null
python3 -m shapewise results --db "$OUT/val2.db" --export "$OUT/validation-repeat.csv"
# A second held-out set, drawn with another seed: for judging what is chosen after seeing the first.
python3 -m shapewise validate --seed 3 --db "$OUT/val3.db" --profile "$OUT/h200.json" --json > "$OUT/validate-seed3.json"
python3 -m shapewise results --db "$OUT/val3.db" --export "$OUT/validation-seed3.csv"
rm -f "$OUT"/*.db "$OUT"/*.db-wal "$OUT"/*.db-shm
echo "all took $(( $(date +%s) - start )) s"
