"""Data and pipeline parallelism on the GPUs of one machine, measured beside `plan`'s prediction of the
same configuration (parallel.step_arrays on the cost model's layer times):

1. `shapewise bench comm` on all GPUs across sizes, each collective beside parallel.ring_ms;
2. DDP and FSDP (torch's) AdamW training steps of three models on all GPUs (shapewise.dataparallel);
3. the 1F1B and interleaved 1F1B schedules (shapewise.pipeline) over 2–8 stages for two models and
   several micro-batch counts: step time and idle time (bubble) per stage.

Run: python benchmarks/multi_gpu.py --out DIR [--gpus N] [--gpu h200]   (on a machine with N GPUs)
     python benchmarks/multi_gpu.py --device cpu --quick --out DIR     (gloo on the CPU, tiny shapes:
     checks the machinery; the predictions are still the GPU's)
It starts torchrun itself (twice: bench comm, then this script's --worker part), records
`nvidia-smi topo -m`, prints each measurement next to its prediction and writes DIR/multi_gpu.json.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shapewise import ModelShape, Workload
from shapewise.cost import SPEC
from shapewise.hardware import get_gpu
from shapewise.memory import PRECISIONS
from shapewise.parallel import layer_times, network_for, ring_ms, step_arrays
from shapewise.presets import get_model

# Models and step sizes on GPUs: (model, micro-batch, seq). Tiny ones on the CPU.
DP_MODELS = [("gpt2", 8, 1024), ("pythia-1b", 4, 2048), ("pythia-2.8b", 2, 2048)]
PP_MODELS = [("pythia-1b", 2, 2048), ("pythia-2.8b", 1, 2048)]
PP_MICRO_BATCHES = (1, 2, 4)  # times the stages: m = p, 2p, 4p
TINY = {name: ModelShape(name=name, hidden=hidden, num_layers=layers, num_heads=4, ffn=2 * hidden, vocab=128,
                         mlp=mlp, norm="rmsnorm", bias=False, tied_embeddings=False)
        for name, hidden, layers, mlp in (("tiny-a", 32, 4, "gelu"), ("tiny-b", 64, 4, "swiglu"),
                                          ("tiny-c", 48, 8, "gelu"))}
QUICK_DP = [("tiny-a", 2, 16), ("tiny-b", 2, 16), ("tiny-c", 2, 16)]
QUICK_PP = [("tiny-a", 2, 16), ("tiny-c", 2, 16)]


def shape_of(name: str) -> ModelShape:
    return TINY[name] if name in TINY else get_model(name)


def pipeline_configs(shape: ModelShape, gpus: int, quick: bool) -> list[tuple[int, int, int]]:
    """(stages, micro-batches, chunks per rank) that divide the layers and fit the GPUs."""
    out = []
    for p in (2, 4, 8) if not quick else (2,):
        for v in (1, 2):
            if p > gpus or shape.num_layers % (p * v):
                continue
            out += [(p, k * p, v) for k in ((1, 2) if quick else PP_MICRO_BATCHES)]
    return out


# ---- the worker: under torchrun, every rank ----

def worker(args) -> None:
    import torch
    import torch.distributed as dist

    from shapewise.dataparallel import time_steps
    from shapewise.pipeline import Layout, build_chunk, run

    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = f"cuda:{torch.cuda.current_device()}" if cuda else "cpu"
    dtype = "bf16" if cuda else "fp32"
    rows = {"dp": [], "pp": []}
    for name, batch, seq in QUICK_DP if args.quick else DP_MODELS:
        for kind in ("ddp", "fsdp"):
            got = time_steps(shape_of(name), kind, batch=batch, seq=seq, device=device, dtype=dtype,
                             warmup=1 if args.quick else 3, steps=2 if args.quick else 10)
            rows["dp"].append({"model": name, "kind": kind, "batch": batch, "seq": seq, "gpus": world, **got})
    repeats = 2 if args.quick else 5
    for name, batch, seq in QUICK_PP if args.quick else PP_MODELS:
        shape = shape_of(name)
        for p, m, v in pipeline_configs(shape, world, args.quick):
            layout = Layout(p, m, v)
            traces = []
            if rank < p:
                chunks = [build_chunk(shape, layout, layout.virtual_stage(rank, c), device=device, dtype=dtype)
                          for c in range(v)]
                gen = torch.Generator().manual_seed(rank)
                tokens = [torch.randint(0, shape.vocab, (batch, seq), generator=gen).to(device) for _ in range(m)]
            for i in range(1 + repeats):  # the first run warms up
                dist.barrier()
                if rank < p:
                    for chunk in chunks:
                        chunk.zero_grad(set_to_none=True)
                    trace = run(chunks, layout, rank=rank, tokens=tokens, targets=tokens,
                                act_shape=(batch, seq, shape.hidden), device=device)
                    if i:
                        traces.append({"wall_s": trace.wall_s, "busy_s": trace.busy_s, "slot_busy": trace.slot_busy,
                                       "slot_end": trace.slot_end})
            if rank < p:
                del chunks
                if cuda:
                    torch.cuda.empty_cache()
            everyone = [None] * world
            dist.all_gather_object(everyone, traces)
            if rank == 0:
                rows["pp"].append(pipeline_row(name, batch, seq, layout, everyone[:p]))
    if rank == 0:
        Path(args.worker_out).write_text(json.dumps(rows))
    dist.barrier()  # no rank tears its group down while another still writes
    dist.destroy_process_group()


def pipeline_row(name, batch, seq, layout, per_rank) -> dict:
    """Per repeat: the step is the slowest rank's wall time; a rank idles the step less its compute."""
    steps = []
    for runs in zip(*per_rank):
        wall = max(r["wall_s"] for r in runs)
        makespan = max(r["slot_end"] for r in runs)
        steps.append({"step_ms": wall * 1e3, "idle_ms": [(wall - r["busy_s"]) * 1e3 for r in runs],
                      "busy_ms": [r["busy_s"] * 1e3 for r in runs],
                      "idle_slots": [makespan - r["slot_busy"] for r in runs]})
    steps.sort(key=lambda s: s["step_ms"])
    median = steps[len(steps) // 2]
    return {"model": name, "batch": batch, "seq": seq, "stages": layout.stages, "micro_batches": layout.micro_batches,
            "virtual": layout.virtual, "formula_idle_slots": layout.bubble_slots, **median,
            "steps_ms": [s["step_ms"] for s in steps]}


# ---- the driver: plain python ----

def torchrun(args, argv, gpus, *, results: str | None = None):
    """Run argv on `gpus` ranks. A rank that ends abnormally fails the run, unless `results` (a file rank
    0 writes only after the last collective, so after every rank's measurements) was written whole:
    gloo can abort a rank as the process groups are torn down ("terminate called without an active
    exception"), and what was measured is then kept, with a warning that says so."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}", *argv]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=3600)
    if done.returncode and results and _whole_json(results):
        last = done.stderr.strip().splitlines()[-1:] or [""]
        print(f"warning: a rank ended abnormally (exit {done.returncode}) after the results were written; "
              f"kept them ({last[0][:160]})", file=sys.stderr)
    elif done.returncode:
        sys.exit(f"failed: {' '.join(command)}\n{done.stderr[-3000:]}")
    return done.stdout


def _whole_json(path: str) -> bool:
    try:
        json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    return True


def predict(shape, *, batch, seq, gpu, params, network, pp=1, vp=1, dp=1, zero=0, micro_batches=1,
            precision="bf16") -> dict:
    """plan's prediction of one layout (parallel.step_arrays), ms by part."""
    workload = Workload(batch=batch, seq=seq, dtype="bf16", attention="flash")
    times = layer_times(shape, workload, gpu=gpu, params=params)
    out = step_arrays(times, shape, workload, pp=pp, vp=vp, dp=dp, ep=1, zero=zero, recompute=0,
                      micro_batches=micro_batches, network=network, params=params, precision=PRECISIONS[precision])
    return {k: float(v) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for multi_gpu.json and topology.txt")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--gpus", type=int, default=None, help="ranks (default: every GPU; 2 on the CPU)")
    ap.add_argument("--gpu", default="h200", help="the GPU plan predicts for")
    ap.add_argument("--quick", action="store_true", help="tiny shapes and few repeats (a smoke test)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.gpus is None:
        import torch

        args.gpus = torch.cuda.device_count() if args.device == "cuda" else 2
    if args.gpus < 2:
        sys.exit("multi_gpu.py needs at least 2 ranks (--gpus)")
    gpu = get_gpu(args.gpu)
    from shapewise.profile import find

    profile = find(gpu)
    params, cost_source = (profile.params, "profile") if profile else (SPEC, "spec-only")
    network = network_for(gpu, gpus_per_node=max(args.gpus, 1))
    result = {"device": args.device, "gpus": args.gpus, "gpu": gpu.key, "quick": args.quick,
              "cost_model": cost_source, "network": network.source}
    smi = shutil.which("nvidia-smi")
    topo = subprocess.run([smi, "topo", "-m"], check=False, capture_output=True, text=True).stdout if smi else "no nvidia-smi here"
    (out / "topology.txt").write_text(topo)
    result["topology"] = topo
    print(f"{args.gpus} ranks on {args.device}; predictions for {gpu.name} ({cost_source}); {network.source}\n{topo}")

    with tempfile.TemporaryDirectory() as tmp:
        sizes = ["4K:64K"] if args.quick else ["64K:2G"]
        text = torchrun(args, ["-m", "shapewise", "bench", "comm", "--device", args.device, "--sizes", *sizes,
                               "--iters", "3" if args.quick else "20", "--json", "--db", f"{tmp}/comm.db"], args.gpus)
        comm = json.loads(text[text.index("["):])
        worker_out = f"{tmp}/worker.json"
        torchrun(args, [__file__, "--worker", "--worker-out", worker_out, "--device", args.device,
                        *(["--quick"] if args.quick else []), "--out", str(out)], args.gpus, results=worker_out)
        work = json.loads(Path(worker_out).read_text())

    print(f"\ncollectives on {args.gpus} ranks: measured, and ring_ms on the intra-node link")
    passes = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0}
    for row in comm:
        row["predicted_ms"] = float(ring_ms(row["bytes"], args.gpus, network.intra_gbs, params, passes=passes[row["op"]]))
        print(f"  {row['op']:15s} {row['bytes'] / 2**20:10.3f} MiB  {row['median_ms']:9.3f} ms  "
              f"predicted {row['predicted_ms']:9.3f} ms  busbw {row['busbw_gbs']:8.2f} GB/s")
    result["comm"] = comm

    print(f"\ndata parallelism on {args.gpus} ranks (AdamW step): measured vs plan")
    for row in work["dp"]:
        shape = shape_of(row["model"])
        pred = predict(shape, batch=row["batch"], seq=row["seq"], gpu=gpu, params=params, network=network,
                       dp=args.gpus, zero=3 if row["kind"] == "fsdp" else 0)
        row["predicted"] = pred
        row["error"] = pred["total_ms"] / row["step_ms"] - 1
        print(f"  {row['model']:12s} {row['kind']:4s} b={row['batch']} s={row['seq']}  {row['step_ms']:9.2f} ms  "
              f"predicted {pred['total_ms']:9.2f} ms ({row['error']:+.1%}; exposed dp comm {pred['dp_comm_ms']:.2f} ms)")
    result["dp"] = work["dp"]

    print("\npipeline (forward and backward, no optimizer): measured vs plan; idle per stage")
    for row in work["pp"]:
        shape = shape_of(row["model"])
        pred = predict(shape, batch=row["batch"], seq=row["seq"], gpu=gpu, params=params, network=network,
                       pp=row["stages"], vp=row["virtual"], micro_batches=row["micro_batches"])
        row["predicted"] = pred
        predicted_step = pred["total_ms"] - pred["optimizer_ms"]
        row["error"] = predicted_step / row["step_ms"] - 1
        # The formula on the measured compute: (p-1)/v of the busiest stage's time per micro-batch.
        stage_ms = max(row["busy_ms"]) / row["micro_batches"]
        row["formula_on_measured_ms"] = (row["stages"] - 1) / row["virtual"] * stage_ms
        print(f"  {row['model']:12s} p={row['stages']} v={row['virtual']} m={row['micro_batches']:<3d} "
              f"step {row['step_ms']:9.2f} ms (predicted {predicted_step:9.2f}, {row['error']:+.1%})  "
              f"idle max {max(row['idle_ms']):8.2f} ms (plan's bubble {pred['bubble_ms']:.2f} + p2p "
              f"{pred['pipeline_comm_ms']:.2f}; formula on measured {row['formula_on_measured_ms']:.2f})  "
              f"idle slots {sorted(set(row['idle_slots']))} vs {row['formula_idle_slots']}")
    result["pp"] = work["pp"]
    (out / "multi_gpu.json").write_text(json.dumps(result, indent=1))
    print(f"\nwrote {out / 'multi_gpu.json'}")


if __name__ == "__main__":
    main()
