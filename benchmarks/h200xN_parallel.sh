#!/usr/bin/env bash
# Data and pipeline parallelism measured against `plan` on every GPU of one machine (2, 4 or 8 H200s).
# Run from the repository root:   OUT=some/folder bash benchmarks/h200xN_parallel.sh
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and friends), as shared machines ask.
set -euo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi -L | wc -l)
{ nvidia-smi; nvidia-smi topo -m; nvidia-smi nvlink -s; } > "$OUT/machine.txt" 2>&1 || true
# bench comm across sizes, DDP and FSDP steps of three models, 1F1B and interleaved 1F1B over 2-8 stages.
python3 benchmarks/multi_gpu.py --gpus "$gpus" --gpu h200 --out "$OUT" 2>&1 | tee "$OUT/multi_gpu.txt"
# The link fitted into the H200 profile from all the GPUs (today's fit came from two).
torchrun --standalone --nproc-per-node "$gpus" -m shapewise calibrate --comm --gpu h200 --no-install \
  --out "$OUT/h200-with-link-x$gpus.json" --db "$OUT/comm.db" > "$OUT/calibrate-comm.txt"
rm -f "$OUT"/*.db "$OUT"/*.db-wal "$OUT"/*.db-shm
