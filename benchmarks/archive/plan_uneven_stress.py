"""plan's uneven pipeline stages stressed (2026-12-06, "uneven pipeline stages in plan"):

  python benchmarks/archive/plan_uneven_stress.py invariants   random (L, p): stage_layers sums to L,
      differs by at most 1, the lighter stages at the ends; stages_text reads back
  python benchmarks/archive/plan_uneven_stress.py fuzz         random models, GPU counts, dtypes and batches
      planned: stages, times, memory parts and the Megatron flags (read back by Megatron-LM's rules) checked
  python benchmarks/archive/plan_uneven_stress.py dump OUT.json   every even layout's prices for 7 cases,
      to compare two versions of the code: dump with each (PYTHONPATH=<checkout>/src), then
  python benchmarks/archive/plan_uneven_stress.py compare A.json B.json
(from the repository root, PYTHONPATH=src; on the CPU, a minute or two each)
"""

import json
import random
import re
import sys
import warnings

from shapewise.errors import ShapewiseError
from shapewise.hf import load_config
from shapewise.plan import megatron_flags, plan

try:
    from shapewise.plan import stages_text
except ImportError:
    stages_text = None
from shapewise.presets import get_model
from shapewise.profile import cost_model

try:
    from shapewise.parallel import stage_layers
except ImportError:  # the code before uneven stages: only `dump` runs there
    stage_layers = None

H = "tests/data/hf/"
EVEN_CASES = [("llama3-70b", 64, "h100", 2**22, 8192, "bf16"), ("llama2-13b", 64, "h100", 256 * 4096, 4096, "bf16"),
              (H + "falcon-7b.json", 32, "a100-80gb", 512 * 2048, 2048, "bf16"),
              (H + "mixtral-8x7b.json", 64, "h100", 2**22, 4096, "bf16"),
              (H + "qwen3-30b-a3b.json", 128, "h100", 2**22, 4096, "bf16"),
              ("llama3-8b", 48, "h100", 96 * 8192, 8192, "fp8"), ("llama3-8b", 24, "h100", 96 * 8192, 8192, "fp16")]


def model(name):
    return load_config(name) if name.endswith(".json") else get_model(name)


def invariants() -> None:
    rng, bad = random.Random(1), 0
    for _ in range(20000):
        L = rng.randint(1, 500)
        p = rng.randint(1, L)
        st = stage_layers(L, p)
        ok = len(st) == p and sum(st) == L and max(st) - min(st) <= 1 and min(st) >= 1
        if L % p and p > 1:
            ok &= st[-1] == min(st) and (st.count(min(st)) < 2 or st[0] == min(st))
        bad += not ok
    for L in range(1, 80):
        for p in range(1, L + 1):
            parts = [part.partition("×") for part in stages_text(stage_layers(L, p)).split("+")]
            assert sum(int(a) * int(c or 1) for a, _, c in parts) == L and sum(int(c or 1) for _, _, c in parts) == p
    print(f"stage_layers: 20,000 random (L, p), {bad} wrong; stages_text read back for every p ≤ L < 80")


def megatron_stages(layout: str) -> list[int]:
    """Layers per stage of Megatron-LM's --pipeline-model-parallel-layout ('Et*6|t*7|…|t*6L')."""
    s = layout.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        s = re.sub(pattern, lambda x: x.group(1) * int(x.group(2)), s)
    return [stage.count("t") for stage in s.split("|")]


def fuzz() -> None:
    warnings.simplefilter("ignore")
    bases = [get_model("gpt2"), get_model("llama3-8b"), get_model("mixtral-8x7b"), load_config(H + "qwen3-30b-a3b.json"),
             load_config(H + "gemma-2-9b-it.json"), load_config(H + "falcon-7b.json")]
    rng, checked, refused, wrong = random.Random(7), 0, 0, []
    for _ in range(400):
        shape = rng.choice(bases).replace(num_layers=rng.randint(1, 40))
        gpu = rng.choice(["h100", "a100-80gb"])
        dtype = rng.choice(["bf16", "fp16"] + (["fp8"] if gpu == "h100" else []))
        gpus = rng.choice([1, 2, 4, 8, 16, 24, 40, 48, 56, 72, 96, 128])
        seq = rng.choice([512, 2048, 4096])
        batch = seq * gpus * rng.choice([1, 2, 4, 8, 16])
        try:
            result = plan(shape, gpus=gpus, gpu=cost_model(gpu, spec_only=True), global_batch_tokens=batch, seq=seq,
                          top=30, dtype=dtype)
        except ShapewiseError:
            refused += 1
            continue
        for p in result.plans:
            checked += 1
            st, L = p.stages, shape.num_layers
            if sum(st) != L or min(st) < 1 or len(st) != p.pp:
                wrong.append(f"stages {st} for {L} layers")
            if p.step_ms <= 0 or min(p.times_ms.values()) < 0 or not 0 <= p.bubble_share < 1 or not 0 < p.mfu < 1:
                wrong.append(f"times {p.times_ms}")
            if abs(sum(p.memory.as_dict().values()) - p.memory.total_bytes) > 1:
                wrong.append("memory parts")
            flags = megatron_flags(p, seq=seq, global_batch_tokens=batch, dtype=dtype)
            layout = re.search(r"--pipeline-model-parallel-layout '([^']+)'", flags)
            first = re.search(r"--decoder-first-pipeline-num-layers (\d+)", flags)
            last = re.search(r"--decoder-last-pipeline-num-layers (\d+)", flags)
            if layout:
                got = megatron_stages(layout.group(1))
            elif first or last:  # Megatron-LM: the first and last as given, the rest split evenly
                a, b = int(first.group(1)) if first else None, int(last.group(1)) if last else None
                k = p.pp - (a is not None) - (b is not None)
                rest = L - (a or 0) - (b or 0)
                got = ([a] if a is not None else []) + [rest // k] * k + ([b] if b is not None else [])
            else:
                got = list(st) if not p.uneven else []
            if got != list(st):
                wrong.append(f"Megatron reads {got} for {st}")
    print(f"{checked:,} plans checked ({refused} cases refused in one line), {len(wrong)} wrong: {wrong[:5]}")


def dump(path: str) -> None:
    out = {}
    for name, gpus, gpu, batch, seq, dtype in EVEN_CASES:
        shape = model(name)
        result = plan(shape, gpus=gpus, gpu=cost_model(gpu, spec_only=True), global_batch_tokens=batch, seq=seq,
                      top=10**7, dtype=dtype)
        out[f"{name}|{gpus}|{gpu}|{dtype}"] = {
            f"{p.tp},{p.pp},{p.dp},{p.vp},{p.ep},{p.batch},{p.micro_batches},{p.recompute},{p.zero}":
            [p.step_ms, p.mfu, p.memory.as_dict(), p.times_ms] for p in result.plans if shape.num_layers % p.pp == 0}
    with open(path, "w") as f:
        json.dump(out, f)


def compare(a: str, b: str) -> None:
    old, new = json.load(open(a)), json.load(open(b))
    same = differ = missing = 0
    for case, rows in old.items():
        for key, value in rows.items():
            if key not in new[case]:
                missing += 1
            elif {k: v for k, v in new[case][key][3].items() if k in value[3]} == value[3] and new[case][key][:3] == value[:3]:
                same += 1
            else:
                differ += 1
    print(f"even layouts: {same:,} priced the same, {differ} differently, {missing} missing")


if __name__ == "__main__":
    {"invariants": invariants, "fuzz": fuzz, "dump": dump, "compare": compare}[sys.argv[1]](*sys.argv[2:])
