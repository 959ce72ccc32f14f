#!/usr/bin/env bash
# The fresh set of attention calls at head dims off 8 (and beside them), drawn after params.PADDED_SDPA was fixed,
# as run on the GPU from the repository root (OUT: a folder): `bench attention` and `bench ops` of four 4-layer
# Llamas (their configs are d68.json, d100.json, d116.json and d128.json here), into one store, then exported.
# Judged on the CPU: python benchmarks/odd_head_dims.py --fresh benchmarks/results/h100-odd-head-dims-fresh/odd.csv.gz
export PYTHONPATH=src PYTHONUNBUFFERED=1
db=$OUT/odd.db
python3 -m shapewise bench attention --heads 6 20 48 --head-dim 20 60 68 92 116 140 180 236 64 72 120 184 --seq 700 3000 \
    --batch 1 --backend default --pass fwd fwdbwd --db $db > $OUT/attention.txt 2>&1
python3 -m shapewise bench attention --heads 48 --kv-heads 8 --head-dim 20 68 116 180 72 120 --seq 1500 --batch 2 \
    --backend default --pass fwd fwdbwd --db $db > $OUT/attention-gqa.txt 2>&1
mkdir -p $OUT/cfg
for spec in "d68:2720:40:8" "d100:3200:32:8" "d116:3712:32:4" "d128:4096:32:8"; do
  IFS=: read name h heads kv <<< "$spec"
  echo "{\"model_type\": \"llama\", \"hidden_size\": $h, \"num_attention_heads\": $heads, \"num_key_value_heads\": $kv, \"num_hidden_layers\": 4, \"intermediate_size\": 8192, \"vocab_size\": 32000, \"max_position_embeddings\": 8192}" > $OUT/cfg/$name.json
  for mode in "decode --batch 32 --seq 4096" "prefill --batch 2 --seq 2000" "train --batch 2 --seq 2048"; do
    python3 -m shapewise bench ops --config $OUT/cfg/$name.json --mode $mode --db $db > $OUT/ops-$name-${mode%% *}.txt 2>&1
  done
done
python3 -m shapewise results --db $db --export $OUT/odd.csv && gzip -f $OUT/odd.csv
