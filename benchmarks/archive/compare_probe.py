"""Hold the cost model against a probe run: predicted and measured time of every GEMM, BMM, fused
attention and elementwise row of benchmarks/probe.py's CSV, with error statistics per set.

Run: python benchmarks/compare_probe.py [benchmarks/results/h200-probe.csv] [--gpu h200] [--worst 10]
"""

import argparse
from pathlib import Path
import csv
import statistics

import numpy as np

from shapewise import predict_gemm
from shapewise.cost import SPEC, predict_ops
from shapewise.ops import MEMORY, Op, attention_op
from shapewise.profile import CostModel


def extra(row) -> dict:
    return dict(pair.split("=", 1) for pair in row["extra"].split(";") if "=" in pair)


def load(path: str) -> list[dict]:
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if not r["error"] and r["time_ms"]]


def predict_rows(rows: list[dict], gpu: str, params=SPEC) -> list[tuple[dict, str, float]]:
    """(row, set name, predicted ms) for every row the cost model covers."""
    out = []
    mm = [r for r in rows if r["kind"] in ("gemm", "bmm")]
    if mm:
        col = lambda key: np.array([int(r[key]) for r in mm])  # noqa: E731
        pred = predict_gemm(col("m"), col("n"), col("k"), batch=col("batch"),
                            layout=np.array([r["layout"] for r in mm]), gpu=CostModel(gpu, params))
        out += [(r, f"{r['kind']}/{extra(r).get('set', '')}", float(t)) for r, t in zip(mm, pred.time_ms)]
    ops = []
    for r in rows:
        e = extra(r)
        # torch 2.11's SDPA runs the cuDNN kernel by default on an H200: the cost model describes that one.
        if r["kind"] == "sdpa" and e.get("backend") == "cudnn" and e.get("kv_heads") == e.get("heads"):
            b, h, s, d = int(e["b"]), int(e["heads"]), int(r["m"]), int(r["k"])
            passes = ("fwd",) if e["pass"] == "fwd" else ("fwd", "bwd")
            ops.append((r, "sdpa/fwd" if e["pass"] == "fwd" else "sdpa/fwdbwd",
                        [attention_op(p, seqs=b, heads=h, kv_heads=h, q_len=s, kv_len=s, head_dim=d, causal=True,
                                      dtype_bytes=2) for p in passes]))
        elif r["kind"] == "elementwise":
            nbytes = float(r["gbps"]) * float(r["time_ms"]) * 1e6
            family = {"layer_norm": "layernorm", "rms_norm": "rmsnorm", "gelu": "act", "swiglu": "glu", "add": "add",
                      "softmax": "softmax", "cross_entropy": "loss"}[e["op"]]
            if e["pass"] == "fwd":
                ops.append((r, f"elementwise/{e['op']}", [Op("x", "fwd", MEMORY, 1, 0, int(nbytes), family=family)]))
            else:  # the probe counts x, dy, y, dx; the forward moves x and y, the backward x, dy and dx
                elems = int(nbytes) // 8
                ops.append((r, f"elementwise/{e['op']}.fwdbwd", [Op("x", "fwd", MEMORY, 1, 0, 4 * elems, family=family),
                                                                Op("x", "bwd", MEMORY, 1, 0, 6 * elems, family=family)]))
    for r, name, op_list in ops:
        out.append((r, name, sum(c.time_ms for c in predict_ops(op_list, gpu=CostModel(gpu, params), dtype="bf16"))))
    return out


def spearman(a, b) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def report(pairs, worst: int = 0) -> None:
    sets: dict[str, list] = {}
    for r, name, pred in pairs:
        sets.setdefault(name, []).append((r, pred))
    print(f"{'set':28} {'n':>4} {'median |err|':>12} {'p90 |err|':>10} {'bias':>7} {'spearman':>8}")
    everything = []
    for name, items in sorted(sets.items()):
        meas = np.array([float(r["time_ms"]) for r, _ in items])
        pred = np.array([p for _, p in items])
        err = pred / meas - 1
        everything += list(zip(err, [r for r, _ in items], pred))
        rho = spearman(pred, meas) if len(items) > 2 else float("nan")
        print(f"{name:28} {len(items):4d} {np.median(abs(err)):12.1%} {np.percentile(abs(err), 90):10.1%} "
              f"{np.median(err):+7.1%} {rho:8.3f}")
    errs = np.array([e for e, _, _ in everything])
    print(f"{'all':28} {len(errs):4d} {np.median(abs(errs)):12.1%} {np.percentile(abs(errs), 90):10.1%} "
          f"{statistics.median(errs):+7.1%}")
    if worst:
        print("\nworst predictions:")
        for e, r, p in sorted(everything, key=lambda t: -abs(t[0]))[:worst]:
            print(f"  {r['kind']:11} {r['layout']:2} b={r['batch']:>4} {r['m']:>6}×{r['n']:>6}×{r['k']:>6} "
                  f"{r['extra'][:40]:40} measured {float(r['time_ms']):8.4f} ms predicted {p:8.4f} ({e:+.0%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", nargs="?", default=str(Path(__file__).parent / "results" / "h200-probe.csv"))
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--worst", type=int, default=10)
    args = parser.parse_args()
    report(predict_rows(load(args.csv), args.gpu), args.worst)


if __name__ == "__main__":
    main()
