#!/usr/bin/env bash
# Issue 18's proof: `shapewise verify` (default selection flags, top 10, 10 interleaved rounds) on real
# models of the config corpus on one H200, then the summary against the targets.
# Run from the repository root on the GPU: OUT=some/folder bash benchmarks/h200_verify_real.sh
# GPU=h100 PROFILE=its calibrate --quick profile verifies on another GPU, ranked as a user of it would be.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
C=${CONFIGS:-tests/data/hf}
MODELS=${MODELS:-"gpt2 opt-1.3b pythia-1b phi-2 stablelm-3b-4e1t llama-3.2-3b llama-2-7b falcon-7b bloom-7b1 qwen2-7b llama-3.1-8b qwen3-8b gemma-7b"}
configs=(); for m in $MODELS; do configs+=("$C/$m.json"); done
nvidia-smi --query-gpu=name,serial,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 benchmarks/verify_real.py "$OUT/verify-real.json" "${configs[@]}" --budget-s "${BUDGET_S:-330}" \
  --rounds "${ROUNDS:-10}" --gpu "${GPU:-h200}" ${PROFILE:+--profile "$PROFILE"} 2>&1 | tee "$OUT/log.txt"
python3 benchmarks/verify_real_summary.py "$OUT/verify-real.json" | tee "$OUT/summary.txt"
