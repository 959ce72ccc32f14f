#!/usr/bin/env bash
# Issue 7's GPU half, for a machine with two H200s. Run from the repository root:
#   OUT=some/folder bash benchmarks/h200x2_tp.sh
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends), as shared machines ask.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
db="$OUT/tp.db"
work=$(mktemp -d)
run() { torchrun --standalone --nproc-per-node 2 -m shapewise "$@"; }
# How the two GPUs are linked (the prediction assumes the datasheet's NVLink).
{ nvidia-smi topo -m; nvidia-smi nvlink -s; } > "$OUT/topology.txt" 2>&1
# Collectives: nccl-tests' bus bandwidth, then the link's parameters fitted into the H200 profile.
run bench comm --sizes 64K:2G --db "$db" > "$OUT/comm.txt"
run calibrate --comm --gpu h200 --no-install --out "$OUT/h200-with-link.json" --db "$db" > "$OUT/calibrate-comm.txt"
# One layer at t=2 against its prediction (collectives included), for several model styles and sizes.
for spec in "gpt3-2.7b 4 2048" "llama2-7b 4 2048" "pythia-2.8b 4 2048" "llama2-13b 2 4096" \
            "mistral-7b 1 4096"; do
  set -- $spec
  run bench layer "$1" --tp 2 --batch "$2" --seq "$3" --gpu h200 --db "$db" --json > "$work/$1-$2-$3.json" \
    || echo "$spec failed" >&2
  echo "== $spec"; cat "$work/$1-$2-$3.json"
done > "$OUT/layers-tp2.txt"
python3 -m shapewise results --db "$db" --export "$OUT/tp.csv"
rm -f "$OUT"/*.db "$OUT"/*.db-wal "$OUT"/*.db-shm
cat "$OUT/topology.txt" "$OUT/comm.txt" "$OUT/calibrate-comm.txt" "$OUT/layers-tp2.txt"
