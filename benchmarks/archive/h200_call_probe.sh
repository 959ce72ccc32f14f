# One device call: the edge draws of seed 3 again (their export), and the layer power probe.
#   bash benchmarks/archive/h200_call_probe.sh   (OUT set by the caller)
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
mkdir -p "$OUT/edges3"
OUT=$OUT/edges3 SEED=3 KIND=edges timeout 200 bash benchmarks/h200_edges.sh > "$OUT/edges3/log.txt" 2>&1
tail -2 "$OUT/edges3/log.txt"; rm -f "$OUT"/edges3/*.db*
timeout 300 python3 benchmarks/archive/layer_power_probe.py "$OUT/layer-power.json" tests/data/hf/{phi-2,gpt-j-6b,llama-3.1-8b,mistral-nemo-12b}.json 2>&1 | grep -v Warning | tail -12
