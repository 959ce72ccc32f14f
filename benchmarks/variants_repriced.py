"""Committed `variants` runs priced again by another profile or code, on the CPU: each measured
candidate found again in its model's neighbourhood by its label (the neighbourhood's shapes do not
depend on the cost model, only their order does), its predicted speedup recomputed, and the set's
figures (share within 3%, Spearman per model) given beside those the run recorded.

python benchmarks/variants_repriced.py [--gpu h100] [--profile PATH] [--power op|none|part] [--configs FOLDER]
    RUN.json[.gz] ...
(the runs: results/h200-variants-*/variants.json*, each drawn at b=4, s=2048 over tests/data/hf, or over
--configs where the run's models came from another folder; or
verify proofs, results/h200-verify-real*/verify-real.json: each model's top 10 priced again, and the
measured speedup of the one now predicted fastest over the best measured)

--power op (check's pricing, and the rankings' but for seed 12's draw): each GEMM pays the power cap
within one call (params.power_*) as if timed alone, past the onset of its own call.
--power none (CostModel.in_a_run; the rankings' for seed 12's draw, reverted after it): no GEMM pays
it. --power part: the cap's onset counts from the start of the call
verify times, a layer's forward+backward or the head's, not from each GEMM's: past the onset, the
part's GEMMs pay the slowdown at their share of peak rate, over the share of the part past it
(its ops taken as spread evenly through it).
"""

import argparse
import dataclasses
import functools
import gzip
import json
import math
import sys
import warnings
from pathlib import Path

from machine_files import machine_profile_at

from shapewise.calibrate import spearman
from shapewise.errors import ShapewiseError
from shapewise.hf import load_config
from shapewise.profile import cost_model
from shapewise.search import _changes, change_text, ranked_neighbours
from shapewise.shapes import Workload
from shapewise.variants import ASPECT_BAND, PARAMS_TOL, WITHIN
from shapewise.verify import TIMED_HEAD_OPS, predicted_step_ms

CONFIGS = {"EleutherAI/gpt-j-6B": "gpt-j-6b", "facebook/opt-1.3b": "opt-1.3b", "meta-llama/Llama-2-7b-hf": "llama-2-7b",
           "microsoft/phi-2": "phi-2", "mistralai/Mistral-7B-v0.1": "mistral-7b-v0.1"}


def model_file(folder: str, model: str) -> str:
    """The config a run's model came from: a run names each model as its config does (the hub id where the
    file has one), so the file of that stem, or the file in `folder` whose model carries that name."""
    stem = Path(folder) / f"{CONFIGS.get(model, model)}.json"
    if stem.exists():
        return str(stem)
    found = _names(folder).get(model)
    if found is None:
        raise ShapewiseError(f"{folder}: no config of the run's model {model!r}; give the folder its configs came "
                             "from (--configs)")
    return found


@functools.lru_cache(maxsize=None)
def _names(folder: str) -> dict[str, str]:
    """Each readable config of `folder` by the model name it gives, read once."""
    names = {}
    for path in sorted(Path(folder).glob("*.json")):
        try:
            with warnings.catch_warnings():  # the files' own notes are not this lookup's
                warnings.simplefilter("ignore")
                names.setdefault(load_config(path).name, str(path))
        except ShapewiseError:
            continue
    return names


def as_built(shape, run: dict):
    """The shape as the run built its layers: runs written before "shared_norms" (every one before
    2026-12-07) built a parallel layer with two norms, where Falcon 7B, GPT-J and Phi share one."""
    return shape if run.get("shared_norms") or shape.norms_per_layer != 1 else shape.replace(norms_per_layer=2)


def as_drawn(candidate, original, run: dict):
    """A candidate as the run drew it: runs written before "rotary_kept" (every one before 2026-12-07) kept a
    partial rotary embedding's fraction at every head dim (Phi-2's 0.4 of 128, 51 dims priced), where the
    neighbourhood now keeps its rotated dims where the fraction gives none whole (rules.keep_rotary)."""
    if run.get("rotary_kept") or candidate.shape.rotary_fraction == original.rotary_fraction:
        return candidate
    return dataclasses.replace(candidate, shape=candidate.shape.replace(rotary_fraction=original.rotary_fraction))


def part_ms(costs, p) -> float:
    """A part's time (its ops priced without the power term) with the cap's onset counted from its start."""
    total = sum(c.total_ms for c in costs)
    busy = sum(c.fraction_of_peak * c.total_ms for c in costs if c.op.is_matmul)
    return total + p.power_slowdown * busy * max(0.0, 1.0 - p.power_onset_ms / total)


def per_token(shape, workload, model, power: str, capped) -> float:
    """Predicted ms per token of layers × layer + head."""
    if power != "part":
        return predicted_step_ms(shape, workload, gpu=model) / workload.tokens
    from shapewise.cost import predict_step
    from shapewise.ops import OUTSIDE_LAYERS

    step = predict_step(shape.one_layer(), workload, gpu=model)
    layer = [c for c in step.costs if c.op.name not in OUTSIDE_LAYERS]
    head = [c for c in step.costs if c.op.name in TIMED_HEAD_OPS]
    return (shape.num_layers * part_ms(layer, capped) + part_ms(head, capped)) / workload.tokens


def by_label(shape, workload, model, keep: set) -> dict:
    """Every shape of a model's neighbourhood (as suggest draws it) by its label, change_text's."""
    original, ranked, _ = ranked_neighbours(shape, workload, model=model, keep=keep, params_tol=PARAMS_TOL,
                                            aspect_band=ASPECT_BAND)
    return {change_text(_changes(original, c)): c for c in ranked}


def found(labels: dict, name: str, label: str):
    if label not in labels:
        raise ShapewiseError(f"{name}: {label!r} is not in its neighbourhood")
    return labels[label]


def fail(message: str) -> int:
    print(f"variants_repriced.py: {message}", file=sys.stderr)
    return 2


def step_per_token(shape, workload, model, power: str, capped, mode: str) -> float:
    """Predicted ms per token of what verify measured: the whole step ("model") or layers × layer + head."""
    if mode == "model":
        from shapewise.cost import predict_step

        return predict_step(shape, workload, gpu=model).time_ms / workload.tokens
    return per_token(shape, workload, model, power, capped)


def verify_proof(run: dict, model, power: str, capped) -> None:
    """benchmarks/verify_real.py's rows (each model's top 10 at b=4, s=2048, suggest's defaults) priced
    again: the share within 3%, and per model the measured speedup of the candidate now predicted
    fastest over the best measured."""
    within = [0, 0, 0]
    low = []
    for name, rows in run.items():
        if not isinstance(rows, list) or not rows:
            continue
        shape = as_built(load_config(f"tests/data/hf/{name}.json"), run)
        workload = Workload(batch=4, seq=2048)
        labels = by_label(shape, workload, model, set())
        base = step_per_token(shape, workload, model, power, capped, rows[0]["mode"])
        priced = []
        for r in rows:
            c = as_drawn(found(labels, name, r["candidate"].split(" ", 1)[1]), shape, run)  # "#3 heads 32→16, …"
            speedup = base / step_per_token(c.shape, c.workload, model, power, capped, r["mode"])
            priced.append((speedup, r["measured_speedup"]))
            within[0] += abs(r["predicted_speedup"] / r["measured_speedup"] - 1) <= WITHIN
            within[1] += abs(speedup / r["measured_speedup"] - 1) <= WITHIN
            within[2] += 1
        top = max(priced)[1] / max(m for _, m in priced)
        low.append(top)
        print(f"  {name:26s} first by this pricing: measured {max(priced)[1]:.3f}, best measured "
              f"{max(m for _, m in priced):.3f} ({top:.3f})")
    print(f"within 3%: {within[0]} → {within[1]} of {within[2]}; first / best measured under 0.97: "
          f"{sum(t < 0.97 for t in low)} of {len(low)} (lowest {min(low):.3f})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--gpu", default="h200", help="the GPU the runs measured (h100: priced with the profile it "
                    "borrows, or with --profile, its `calibrate --quick` profile)")
    ap.add_argument("--profile", help="the profile to price with (default: the shipped H200 profile)")
    ap.add_argument("--configs", default="tests/data/hf", help="the folder the runs' models came from (tests/data/hf)")
    ap.add_argument("--power", choices=("op", "none", "part"), default="op",
                    help="where the power cap's onset counts from (default op: the cost model's own)")
    args = ap.parse_args()
    try:
        model = cost_model(args.gpu, profile=args.profile and machine_profile_at(args.profile, args.gpu))
    except ShapewiseError as e:
        return fail(str(e))
    capped = model.params
    if args.power != "op":
        model = model.in_a_run()
    for path in args.runs:
        try:
            run = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
        except (OSError, ValueError) as e:
            return fail(f"cannot read {path}: {e}")
        if "models" not in run:  # a verify proof (benchmarks/verify_real.py)
            print(path)
            verify_proof(run, model, args.power, capped)
            continue
        within = [0, 0, 0, 0]  # recorded within, repriced within, candidates, models with rho ≥ 0.9
        low = []
        for m in run["models"]:
            if m.get("error"):
                continue
            try:
                shape = as_built(load_config(model_file(args.configs, m["model"])), run)
            except ShapewiseError as e:
                return fail(str(e))
            workload = Workload(batch=m["batch"], seq=m["seq"])
            labels = by_label(shape, workload, model, {"tp"})
            base = per_token(shape, workload, model, args.power, capped)
            old, new, measured = [1.0], [1.0], [1.0]
            for c in m["candidates"]:
                if c["error"] or not math.isfinite(c["measured_speedup"] or math.nan):
                    continue
                drawn = as_drawn(found(labels, m["model"], c["candidate"]), shape, run)
                speedup = base / per_token(drawn.shape, drawn.workload, model, args.power, capped)
                old.append(c["predicted_speedup"])
                new.append(speedup)
                measured.append(c["measured_speedup"])
                within[0] += abs(c["predicted_speedup"] / c["measured_speedup"] - 1) <= WITHIN
                within[1] += abs(speedup / c["measured_speedup"] - 1) <= WITHIN
                within[2] += 1
            rho_old, rho_new = spearman(old, measured), spearman(new, measured)
            within[3] += rho_new >= 0.9
            low.append((rho_new, m["model"]))
            print(f"  {m['model']:28s} Spearman {rho_old:.3f} → {rho_new:.3f}")
        print(f"{path}: within 3%: {within[0]} → {within[1]} of {within[2]}; Spearman ≥ 0.9: {within[3]} of {len(low)}"
              f" (lowest {min(low)[0]:.3f}, {min(low)[1]})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ShapewiseError as e:
        sys.exit(fail(str(e)))
    except (KeyError, TypeError) as e:
        sys.exit(fail(f"not a variants run (validate --set variants --json): no {e}"))
