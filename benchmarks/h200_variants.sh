#!/usr/bin/env bash
# Issue 17's variants set on one H200: `shapewise validate --set variants` over 16 real models of the
# config corpus (b=4, s=2048, 20 interleaved rounds; each shape built as one layer + the output head,
# the step taken as layers × layer + head, and predicted as the same), then the summary.
# Models whose layer shapewise builds faithfully: not BLOOM, Qwen3 or OLMo 2 (the torch layer leaves out
# ALiBi's bias or QK-norm, which their predictions count), no MoE or latent attention.
# Run from the repository root on the GPU: OUT=some/folder SEED=N bash benchmarks/h200_variants.sh
# GPU=h100 PROFILE=its calibrate --quick profile measures another GPU, predicted as a user of it would be.
# A guard interrupts the run after LIMIT_S seconds (480): validate then prints the models it finished.
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
C=${CONFIGS:-tests/data/hf}
MODELS=${MODELS:-"gpt2 opt-1.3b pythia-1b phi-2 stablelm-3b-4e1t llama-2-7b llama-3.2-3b qwen2.5-3b falcon-7b gpt-j-6b mistral-7b-v0.1 gemma-7b starcoder2-3b qwen2-7b llama-3.1-8b mistral-nemo-12b"}
SIZE=(--seed "${SEED:-1}" --batch "${BATCH:-4}" --seq "${SEQ:-2048}" --rounds "${ROUNDS:-20}")
configs=(); for m in $MODELS; do configs+=("$C/$m.json"); done
nvidia-smi --query-gpu=name,serial,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
python3 benchmarks/variants_plan.py "${configs[@]}" "${SIZE[@]}" | tee "$OUT/plan.txt"
start=$(date +%s)
timeout -s INT "${LIMIT_S:-480}" python3 -m shapewise validate --set variants --configs "${configs[@]}" "${SIZE[@]}" \
  --gpu "${GPU:-h200}" ${PROFILE:+--profile "$PROFILE"} --device "${DEVICE:-cuda}" --warmup-ms 25 --json >"$OUT/variants.json" 2>"$OUT/log.txt"
echo "validate exit $? after $(( $(date +%s) - start )) s" | tee -a "$OUT/log.txt"
python3 benchmarks/variants_summary.py "$OUT/variants.json" | tee "$OUT/summary.txt"
