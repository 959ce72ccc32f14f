"""Before `validate --set variants` goes to the GPU: what it will measure and about how long it takes,
from the cost model, on any machine.

Per model: the candidates drawn (the same draw the run makes: same seed, configs and profile), the
distinct parts timed (verify times a layer or head that shapes share once), the slowest part's
predicted time, and the timed seconds: rounds × each part's time per round, which is its budget or
one call, whichever is longer. The estimate adds an allowance per part for what is not timed
(building it, its first call, the host-time probe and the warm-up) and one for starting torch and
CUDA; both are allowances (--part-s, --start-s), not measurements: the run's own log says what it took.

python benchmarks/variants_plan.py CONFIG... [--seed 1] [--batch 4] [--seq 2048] [--rounds 20]
       [--budget-ms 10] [--part-s 1] [--start-s 30]
"""

import argparse
import sys

from shapewise.cost import predict_layer_and_outside
from shapewise.judges import read_configs
from shapewise.profile import cost_model
from shapewise.shapes import Workload
from shapewise.variants import draw
from shapewise.verify import TIMED_HEAD_OPS, part_names


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="+")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--budget-ms", type=float, default=10, help="each part's timed share of a round")
    ap.add_argument("--part-s", type=float, default=1.0, help="allowance per part for what is not timed")
    ap.add_argument("--start-s", type=float, default=30, help="allowance for starting torch and CUDA")
    ap.add_argument("--gpu", default="h200")
    args = ap.parse_args()
    model = cost_model(args.gpu)
    workload = Workload(batch=args.batch, seq=args.seq)
    total_s, num_parts, num_candidates = args.start_s, 0, 0
    print(f"{'model':20s} {'neighbourhood':>13s} {'candidates':>10s} {'parts':>5s} {'slowest part':>12s} "
          f"{'timed':>7s} {'estimate':>8s}")
    for n in draw(read_configs(args.configs), seed=args.seed, workload=workload, model=model):
        parts = {}
        for shape, w in [(n.shape, n.workload), *((s, w) for _, _, s, w in n.candidates)]:
            layer_ms, outside = predict_layer_and_outside(shape, w, gpu=model)
            layer, head = part_names(shape, w)
            parts[layer] = layer_ms
            parts[head] = sum(c.total_ms for c in outside if c.op.name in TIMED_HEAD_OPS)
        timed_s = sum(args.rounds * max(args.budget_ms, ms) for ms in parts.values()) / 1e3
        estimate_s = timed_s + args.part_s * len(parts)
        total_s += estimate_s
        num_parts += len(parts)
        num_candidates += len(n.candidates)
        print(f"{n.shape.name:20s} {n.size:13d} {len(n.candidates):10d} {len(parts):5d} {max(parts.values()):9.1f} ms "
              f"{timed_s:5.1f} s {estimate_s:6.1f} s")
    print(f"{num_candidates} candidates, {num_parts} parts, {args.rounds} rounds: about {total_s:.0f} s on {model.gpu.name} "
          f"(timed from the cost model; {args.part_s:g} s per part and {args.start_s:g} s to start allowed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
