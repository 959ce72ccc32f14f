#!/usr/bin/env bash
# Issue 5's targets: for presets whose shapes lose time, measure the original and every suggestion
# (`shapewise suggest`'s top 5) interleaved, and compare measured with predicted speedups.
# Run from the repository root on the GPU: OUT=some/folder bash benchmarks/h200_verify.sh
set -uo pipefail
export PYTHONPATH=src PYTHONUNBUFFERED=1
for model in gpt2 gpt2-medium gpt3-2.7b gpt3-6.7b pythia-2.8b phi-2 falcon-7b benchmarks/configs/llama-swiglu-8h3.json; do
  name=$(basename "$model" .json)
  python3 -m shapewise verify "$model" --gpu h200 --batch 4 --seq 2048 --top 5 --rounds 15 --json > "$OUT/verify-$name.json" \
    || echo "verify $model failed"
  python3 - "$OUT/verify-$name.json" "$name" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
best = max(r["measured_speedup"] for r in rows)
print(f"{sys.argv[2]:18} top: predicted {rows[0]['predicted_speedup']:.3f} measured {rows[0]['measured_speedup']:.3f} "
      f"[{rows[0]['ci'][0]:.3f}, {rows[0]['ci'][1]:.3f}]; best measured {best:.3f}; top/best {rows[0]['measured_speedup'] / best:.3f}")
PY
done
