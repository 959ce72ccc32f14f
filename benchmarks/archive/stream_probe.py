"""Do a layer's ops run faster back to back than each timed alone, and by how much at small micro-batches?
The variants set measures layers whole and prices them as the sum of their ops each timed alone; its
micro-batch-1 candidates are measured about 1% faster than priced (seeds 6-12), its batch-8 candidates
of falcon-7b at hidden 4480 1.1% slower. For a few real models and falcon-7b's two neighbours, at
several micro-batches (s=2048, training), one layer forward+backward as verify builds it: its ops each
timed alone (`bench ops`) against the shipped profile's predictions, the layer timed alone (as verify's
rounds time it), and the layer's kernels in one call under the profiler: the GPU time of its GEMM,
attention and memory-bound kernels in the stream, and the gaps between them.

PYTHONPATH=src:benchmarks/archive python3 benchmarks/archive/stream_probe.py OUT.json   (on a GPU; ~2 min)
PYTHONPATH=src python3 benchmarks/archive/stream_probe.py --summary OUT.json[.gz]   (on the CPU: the figures,
and the committed H200 variants runs' errors by the candidates' micro-batch)
"""

import dataclasses
import glob
import gzip
import json
import re
import statistics
import sys
import tempfile

from shapewise.hf import load_config

C = "tests/data/hf"
FALCON_4480 = dict(hidden=4480, num_layers=33, num_heads=35, head_dim=128, ffn=17920)
FALCON_4608 = dict(hidden=4608, num_layers=31, num_heads=36, head_dim=128, ffn=18432)
CASES = [("falcon-7b", {}, (1, 4, 8)), ("falcon-7b", FALCON_4480, (4, 8)), ("falcon-7b", FALCON_4608, (4, 8)),
         ("mistral-nemo-12b", {}, (1, 4, 8)), ("llama-3.1-8b", {}, (1, 2, 4)), ("phi-2", {}, (1, 4))]
ATTENTION_WORDS = ("flash", "fmha", "attention", "cudnn")
GEMM_WORDS = ("gemm", "xmma", "cutlass", "nvjet", "gemv", "splitkreduce")


def kind(name: str) -> str:
    low = name.lower()
    if any(w in low for w in ATTENTION_WORDS):
        return "attention"
    return "gemm" if any(w in low for w in GEMM_WORDS) else "memory"


def in_stream(fn) -> dict:
    """One call's kernels in the stream: GPU ms by kind, their count, the span first start to last end."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() > 0]
    out = {"gemm": 0.0, "attention": 0.0, "memory": 0.0}
    for e in events:
        out[kind(e.name)] += e.time_range.elapsed_us() / 1e3
    start = min(e.time_range.start for e in events)
    end = max(e.time_range.end for e in events)
    return dict(stream_ms=out, kernels=len(events), span_ms=(end - start) / 1e3,
                names=sorted({f"{kind(e.name)}: {e.name[:80]}" for e in events}))


def alone_by_kind(ops: list) -> dict:
    """The ops each timed alone and as predicted, ms by kind (the layer's count of each)."""
    out = {k: [0.0, 0.0] for k in ("gemm", "attention", "memory")}
    for name, _pass, count, measured, predicted in ops:
        k = "attention" if name.endswith("flash") else "gemm" if name.split("/")[-1] in (
            "qkv", "out", "up", "down", "gate", "q", "kv", "proj") else "memory"
        out[k][0] += count * (measured or float("nan"))
        out[k][1] += count * predicted
    return out


def summary(path: str) -> int:
    """The layer timed whole against its ops timed alone, by model and micro-batch; then the variants runs'
    errors (predicted / measured speedup − 1) by the candidate's micro-batch."""
    rows = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    print("layer timed whole / its ops timed alone − 1 (the profile's prediction / ops alone − 1):")
    for r in rows:
        hidden = r["changes"].get("hidden", "")
        print(f"  {r['model'][-16:]:16s} {str(hidden):5s} b{r['batch']}: {r['layer_alone_ms'] / r['ops_alone_ms'] - 1:+.1%} "
              f"({r['predicted_ms'] / r['ops_alone_ms'] - 1:+.1%})")
    errors: dict = {}
    for run in sorted(glob.glob("benchmarks/results/h200-variants-*/variants.json.gz")):
        seed = re.search(r"variants-(\d+)", run)
        if not seed or int(seed.group(1)) < 6:  # before seed 6 the rounds ran in a fixed order
            continue
        for m in json.load(gzip.open(run))["models"]:
            for c in m["candidates"]:
                if c.get("measured_speedup"):
                    batch = re.search(r"batch \d+→(\d+)", c["candidate"])
                    errors.setdefault(batch.group(1) if batch else "4", []).append(
                        c["predicted_speedup"] / c["measured_speedup"] - 1)
    print("H200 variants runs 6-12, predicted / measured speedup − 1 by the candidate's micro-batch (the original's 4):")
    for batch, e in sorted(errors.items(), key=lambda kv: int(kv[0])):
        print(f"  b{batch}: {len(e)} candidates, mean {statistics.mean(e):+.2%}, median {statistics.median(e):+.2%}")
    return 0


def main() -> int:
    if sys.argv[1] == "--summary":
        return summary(sys.argv[2])
    import torch
    from layer_power_probe import layer_parts

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for config, changes, batches in CASES:
            shape = dataclasses.replace(load_config(f"{C}/{config}.json"), **changes)
            for batch in batches:
                r, fn = layer_parts(shape, batch, f"{tmp}/ops.db")
                r.update(in_stream(fn), changes=changes, alone=alone_by_kind(r["ops"]))
                del fn
                torch.cuda.empty_cache()
                out.append(r)
                s = r["stream_ms"]
                a = r["alone"]
                print(f"{config[:16]:16s} {str(changes.get('hidden', '')):5s} b{batch}: predicted {r['predicted_ms']:.3f} "
                      f"alone {r['ops_alone_ms']:.3f} layer {r['layer_alone_ms']:.3f} span {r['span_ms']:.3f} | "
                      + " ".join(f"{k} {a[k][1]:.3f}/{a[k][0]:.3f}/{s[k]:.3f}" for k in s)
                      + f" | {r['kernels']} kernels", flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
