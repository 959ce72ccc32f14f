"""suggest's price of a model against check's, for models whose layers differ (dense-first MoE layers,
windowed layers among global ones) and one whose layers are alike: the ratio of suggest's original ms
per token to check's step per token, in training, prefill and decoding. 1.0000 since 2026-12-06; the
figures before ("a new user's consistency pass": up to 1.94) come from the code before the mend:
`git worktree add /tmp/before 6f8f4de~1 && PYTHONPATH=/tmp/before/src python benchmarks/archive/unlike_layers.py`.

PYTHONPATH=src python benchmarks/archive/unlike_layers.py   (on the CPU, seconds)
"""

import warnings

from shapewise import check
from shapewise.search import suggest
from shapewise.hf import load_config
from shapewise.shapes import Workload

MODELS = ["tests/data/hf/gemma-2-9b-it.json", "tests/data/hf/gemma-3-4b-it.json",
          "tests/data/hf-later/llama-4-maverick-17b-128e-instruct-fp8.json", "tests/data/hf/deepseek-v3.json",
          "tests/data/hf-later/gpt-oss-20b.json", "tests/data/hf/llama-3.1-8b.json"]
WORKLOADS = {"train (b4 s2048)": Workload(batch=4, seq=2048), "decode (b16 s8192)": Workload(batch=16, seq=8192,
             mode="decode"), "prefill (b1 s8192)": Workload(batch=1, seq=8192, mode="prefill")}

warnings.simplefilter("ignore")  # the configs' notes (multimodal, MTP layers) are beside the point here
print(f"{'model':40s} " + " ".join(f"{w:>20s}" for w in WORKLOADS))
for path in MODELS:
    shape = load_config(path)
    ratios = []
    for w in WORKLOADS.values():
        original = suggest(shape, w, gpu="h200").original
        ratios.append(original.step_ms / check(shape, w, gpu="h200").step.time_ms)
    print(f"{shape.name:40s} " + " ".join(f"{r:20.4f}" for r in ratios))
