#!/usr/bin/env bash
# validate's independent sets measured on an H200 (issue 17): `wide` (seeds in WIDE), `attention`
# (ATTENTION) and `models` (MODELS, over the configs in CONFIGS), into one results store, each phase
# time-limited so that what was measured comes back; then the kernels each case ran. Writes
# OUT/h200-machine.json (with QUICK_CALIBRATE=1: `calibrate --quick`'s profile), OUT/judges.csv (every measurement: `shapewise results --import` it and judge with `validate
# --from-db`), OUT/judges.db (the store itself, in case the export is cut short), OUT/kernels.csv, OUT/census.json.gz (the
# kernels named, as far as they got: the store's "kernels" rows with their metrics), OUT/gpu.txt (which H200: its serial and UUID) and OUT/log.txt.
#   OUT=folder WIDE="1 2" ATTENTION="1" MODELS="1" WIDE_LATE="3" CONFIGS=tests/data/hf BUDGET_S=480 \
#     [MODELS_S=200] bash benchmarks/h200_judges.sh
# GPU=h100 measures on an H100 (predicted with the profile it borrows, the H200's; `calibrate --quick`'s
# profile is then OUT/h100-machine.json).
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
start=$(date +%s)
db="$OUT/judges.db"
nvidia-smi --query-gpu=name,serial,uuid,driver_version,clocks.max.sm,temperature.gpu --format=csv > "$OUT/gpu.txt"
cat "$OUT/gpu.txt"
gpu=${GPU:-h200}
profile=()  # the shipped profile itself on an H200 (never a user's); elsewhere the one the GPU finds
[ "$gpu" = h200 ] && profile=(--profile src/shapewise/data/profiles/h200.json)
sets=()
left() { echo $(( ${BUDGET_S:-480} - ${KERNELS_S:-45} - 15 - $(date +%s) + start )); }  # kept for naming kernels and exporting
v() {  # one set: LIMIT_S NAME SEED, cut to the time left
    local limit=$1 name=$2 seed=$3 step
    step=$(date +%s)
    (( $(left) < limit )) && limit=$(left)
    (( limit < 10 )) && { echo "$name $seed: skipped, out of time"; return; }
    local configs=()  # only the models set is drawn over configs (validate refuses --configs for the others)
    [ "$name" = models ] && configs=(--configs $CONFIGS)  # one folder or several, split at spaces
    timeout "$limit" python3 -m shapewise validate --set "$name" --seed "$seed" "${configs[@]}" --db "$db" \
        --gpu "$gpu" "${profile[@]}" 2>&1 | grep -E "^(gemm|bmm|attention|memory|step|gemm) " | grep calibrated
    echo "$name $seed: $(( $(date +%s) - step )) s (all: $(( $(date +%s) - start )) s)"
    sets+=("$name:$seed")
}
if [ -n "${QUICK_CALIBRATE:-}" ]; then  # this machine's factors on top of the shipped profile, timed end to end
    step=$(date +%s)
    python3 -m shapewise calibrate --quick --db "$db" --out "$OUT/$gpu-machine.json" --no-install
    echo "calibrate --quick: $(( $(date +%s) - step )) s"
fi
for seed in ${WIDE:-}; do v 150 wide "$seed"; done
for seed in ${ATTENTION:-}; do v 90 attention "$seed"; done
for seed in ${MODELS:-}; do v "${MODELS_S:-200}" models "$seed"; done
for seed in ${WIDE_LATE:-}; do v 150 wide "$seed"; done
# The census is kept in the store as it goes (bench.kernel_census), so the export below carries what was
# named even where the 45 s run out before the CSV was written: say so rather than end quietly.
# KERNELS_S=0 names none (a short call).
[ "${KERNELS_S:-45}" -gt 0 ] && { timeout "${KERNELS_S:-45}" python3 benchmarks/judge_kernels.py "$OUT/kernels.csv" --db "$db" \
    --set "${sets[@]}" --configs $CONFIGS \
    || echo "judge_kernels.py stopped (exit $?; 124: its ${KERNELS_S:-45} s ran out): no $OUT/kernels.csv, the export holds what it named"; }
python3 -m shapewise results --db "$db" --export "$OUT/judges.csv"
# The census's names and grids are metrics, which only a JSON export carries: kept, gzipped, whether or
# not judge_kernels.py wrote its CSV.
python3 -m shapewise results --db "$db" --bench kernels --export "$OUT/census.json" && gzip -f "$OUT/census.json" \
    || echo "no kernels named (KERNELS_S=0, or none measured): no census.json"
echo "all took $(( $(date +%s) - start )) s"
