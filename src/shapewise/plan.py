"""The whole run on a cluster: every way to spread a model over N GPUs (tensor, pipeline and data
parallelism, virtual stages, micro-batch, recomputation, ZeRO stage, expert parallelism), the ones
that fit in memory, ranked by predicted time per step. Pipeline stages need not divide the layers:
stage_layers says how uneven ones are cut.

Each distinct (shape, t, micro-batch) is priced once by the cost model (parallel.layer_times); the
thousands of layouts built on it are combined with numpy (parallel.step_arrays for time,
memory.training_arrays for memory).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .errors import ShapewiseError, argument, check_name, warn
from .hardware import GPU
from .limits import COUNT, RATE, SANE_BATCH_SEQUENCES, SANE_BATCH_TOKENS, SEQ, TOKENS_TO_TRAIN, flag
from .memory import FRAMEWORKS, PRECISIONS, Memory, capacity_bytes, training_arrays, training_precision
from .parallel import FSDP_WITH_PIPELINE, RECOMPUTE, Network, layer_times, network_for, stage_layers, step_arrays
from .profile import CostModel, cost_model
from .shapes import ModelShape, Workload

MICRO_BATCHES = (1, 2, 4, 8, 16, 32)
GPUS_PER_NODE = 8  # an HGX or DGX node: 8 GPUs on NVLink, the nodes joined by the network
MAX_VIRTUAL = 8  # virtual stages per pipeline rank tried (Megatron's interleaved schedule)
LAYOUT = ("tp", "pp", "dp", "vp", "ep", "batch", "micro_batches", "recompute", "zero")
TIME_PARTS = ("compute_ms", "recompute_ms", "bubble_ms", "pipeline_comm_ms", "dp_comm_ms", "ep_comm_ms",
              "optimizer_ms", "tp_comm_ms")


@dataclass(frozen=True)
class Plan:
    shape: ModelShape
    tp: int
    pp: int
    dp: int
    vp: int
    ep: int
    batch: int  # micro-batch, sequences
    micro_batches: int  # m, per pipeline per step
    recompute: str
    zero: int
    step_ms: float
    tokens_per_s: float
    mfu: float
    memory: Memory
    times_ms: dict  # the parts of TIME_PARTS; compute includes recompute and tensor-parallel collectives

    @property
    def communication_share(self) -> float:
        t = self.times_ms
        return (t["tp_comm_ms"] + t["pipeline_comm_ms"] + t["dp_comm_ms"] + t["ep_comm_ms"]) / self.step_ms

    @property
    def bubble_share(self) -> float:
        return self.times_ms["bubble_ms"] / self.step_ms

    @property
    def stages(self) -> tuple[int, ...]:
        """Layers on each pipeline rank, first to last (each rank's v chunks together)."""
        return stage_layers(self.shape.num_layers, self.pp)

    @property
    def uneven(self) -> bool:
        return len(set(self.stages)) > 1

    def layout_text(self) -> str:
        return (f"t={self.tp} p={self.pp}" + (f"×{self.vp}" if self.vp > 1 else "") + f" d={self.dp}"
                + (f" e={self.ep}" if self.ep > 1 else "") + f" b={self.batch} m={self.micro_batches}"
                + f" recompute={self.recompute} zero={self.zero}"
                + (f" stages={stages_text(self.stages)}" if self.uneven else ""))


@dataclass(frozen=True)
class PlanResult:
    plans: tuple[Plan, ...]  # fitting, fastest first, `top` of them
    considered: int  # layouts enumerated
    fitting: int
    seconds: float
    gpus: int
    global_batch_tokens: int
    seq: int
    network: Network
    cost_source: str

    def to_json(self, *, train_tokens: int | None = None) -> dict:
        """What `plan --json` prints of it (less the warnings said), with each plan's time to train train_tokens
        where given (plan --tokens), checked as the flag is."""
        if train_tokens is not None:
            train_tokens = TOKENS_TO_TRAIN.keyword(train_tokens, "train_tokens")
        return to_json(self, train_tokens=train_tokens)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def stages_text(stages: tuple[int, ...]) -> str:
    """'5+6×10+5': runs of equal stages as layers×stages, adding up to the layers."""
    runs = [(n, len(list(group))) for n, group in itertools.groupby(stages)]
    return "+".join(f"{n}×{count}" if count > 1 else str(n) for n, count in runs)


def _tensor_degrees(shape: ModelShape, *, gpus: int, gpus_per_node: int) -> list[int]:
    """The tensor-parallel degrees a layout may take: within a node, dividing the GPUs, the heads, the kv
    heads and the (expert) MLP width."""
    width = shape.mlp_width
    return [t for t in _divisors(gpus_per_node) if gpus % t == 0 and shape.num_heads % t == 0
            and shape.kv_heads % t == 0 and width % t == 0]


def _pipeline_degrees(shape: ModelShape, *, gpus: int, tp: int) -> list[int]:
    """The pipeline degrees beside t: dividing the GPUs left, at most one stage a layer."""
    return [p for p in range(1, min(shape.num_layers, gpus // tp) + 1) if gpus % (tp * p) == 0]


def layouts(shape: ModelShape, *, gpus: int, global_batch: int, gpus_per_node: int,
            micro_batches=MICRO_BATCHES, zero_stages=(0, 1, 2, 3), recompute=RECOMPUTE) -> dict:
    """Every layout as numpy arrays (keys: LAYOUT). The constraints: t divides the heads, the kv heads
    and the FFN width and stays within a node; p is at most the layers (stage_layers where it does not
    divide them) and p·v divides the layers; d = N/(t·p); b·d divides the global batch (sequences) into
    m micro-batches, m a multiple of p when interleaved; e divides d and the experts; ZeRO-3 (FSDP) only
    without pipeline stages (FSDP_WITH_PIPELINE says why)."""
    rows = []
    for t in _tensor_degrees(shape, gpus=gpus, gpus_per_node=gpus_per_node):
        for p in _pipeline_degrees(shape, gpus=gpus, tp=t):
            d = gpus // (t * p)
            eps = [e for e in _divisors(d) if shape.num_experts % e == 0] if shape.is_moe else [1]
            for b in micro_batches:
                if global_batch % (b * d):
                    continue
                m = global_batch // (b * d)
                # Interleaving only where p·v divides the layers: chunks of uneven stages would need
                # a schedule and a bubble of their own, which step_arrays does not price.
                vps = [1] + [v for v in range(2, MAX_VIRTUAL + 1)
                             if p > 1 and shape.num_layers % (p * v) == 0 and m % p == 0]
                zeros = [z for z in zero_stages if p == 1 or z < 3] if d > 1 else (0,)  # FSDP_WITH_PIPELINE
                for v, e, r, z in itertools.product(vps, eps, range(len(recompute)), zeros):
                    rows.append((t, p, d, v, e, b, m, RECOMPUTE.index(recompute[r]), z))
    if not rows:
        return {k: np.zeros(0, dtype=int) for k in LAYOUT}
    table = np.array(rows, dtype=np.int64)
    return {k: table[:, i] for i, k in enumerate(LAYOUT)}


def plan(shape: ModelShape, *, gpus: int, gpu: GPU | str | CostModel, global_batch_tokens: int, seq: int,
         gpus_per_node: int = GPUS_PER_NODE, inter_gbs: float | None = None, intra_gbs: float | None = None,
         precision: str | None = None, framework: str = "megatron", dtype: str = "bf16", attention: str = "flash",
         top: int = 5, overlap_dp: bool = True, shapes: tuple[ModelShape, ...] = ()) -> PlanResult:
    """The fastest layouts of `shape` (and of each of `shapes`, alternatives of about its size) on
    `gpus` GPUs that fit in memory; a step is global_batch_tokens tokens of sequences of `seq`.
    gpu: a cost model, or a GPU name priced by its default (profile.cost_model), as everywhere else.
    inter_gbs, intra_gbs: GB/s per GPU between nodes and within one, where not the datasheet's
    (parallel.network_for)."""
    start = time.perf_counter()
    model = cost_model(gpu)
    gpu, params = model.gpu, model.params
    gpu.peak_tflops(dtype)  # a dtype the GPU lacks is said first, before the links it would need
    # Bounded as the flags are: a --seq past limits.SEQ was planned from Python, found no layout, and said nothing.
    gpus, gpus_per_node = COUNT.keyword(gpus, "gpus"), COUNT.keyword(gpus_per_node, "gpus_per_node")
    global_batch_tokens = COUNT.keyword(global_batch_tokens, "global_batch_tokens")
    seq, top = SEQ.keyword(seq, "seq"), COUNT.keyword(top, "top")  # a caller may ask for every layout
    inter_gbs, intra_gbs = (None if gbs is None else RATE.keyword(gbs, name) for gbs, name in (
        (inter_gbs, "inter_gbs"), (intra_gbs, "intra_gbs")))
    precision = training_precision(dtype) if precision is None else precision  # fp32's state for an fp32 step
    check_name(precision, PRECISIONS, "precision")
    check_name(framework, FRAMEWORKS, "framework")
    overlap_dp = flag(overlap_dp, "overlap_dp")
    if isinstance(shapes, ModelShape) or not isinstance(shapes, Iterable):
        raise ShapewiseError(f"shapes must be a tuple of ModelShapes, got {shapes!r:.100}")
    shapes = tuple(shapes)  # a generator is read once: checked here, then planned (it was planned empty)
    for other in shapes:
        if not isinstance(other, ModelShape):
            raise ShapewiseError(f"shapes must be ModelShapes, got {other!r:.100}")
    if global_batch_tokens % seq:
        tokens = "token" if global_batch_tokens == 1 else "tokens"
        raise ShapewiseError(f"the global batch of {global_batch_tokens:,} {tokens} is not a whole number of "
                             f"sequences of {seq:,}; give a multiple of {seq:,}")
    _say_absurd_batch(global_batch_tokens, seq)
    if gpus > gpus_per_node and gpus % gpus_per_node:
        raise ShapewiseError(f"{gpus} GPUs do not fill whole nodes of {gpus_per_node}; give a multiple of {gpus_per_node}")
    network = network_for(gpu, gpus=gpus, gpus_per_node=gpus_per_node, inter_gbs=inter_gbs, intra_gbs=intra_gbs)
    prec, fw = PRECISIONS[precision], FRAMEWORKS[framework]
    sequences = global_batch_tokens // seq
    found: list[tuple[float, ModelShape, dict, int]] = []
    considered = fitting = 0
    for s in (shape, *shapes):
        lay = layouts(s, gpus=gpus, global_batch=sequences, gpus_per_node=min(gpus_per_node, gpus))
        count = len(lay["tp"])
        considered += count
        if not count:
            continue
        mem = training_arrays(s, seq=seq, dtype_bytes=Workload(dtype=dtype).dtype_bytes, attention=attention,
                              tp=lay["tp"], pp=lay["pp"], dp=lay["dp"], vp=lay["vp"], ep=lay["ep"], zero=lay["zero"],
                              recompute=lay["recompute"], batch=lay["batch"], micro_batches=lay["micro_batches"],
                              precision=prec, framework=fw)
        total = sum(mem.values())
        fits = total <= capacity_bytes(gpu)
        fitting += int(fits.sum())
        parts = {k: np.zeros(count) for k in (*TIME_PARTS, "total_ms", "dp_hidden_ms")}
        flops = np.zeros(count)
        # Price each distinct (t, micro-batch) once; every layout on it is arithmetic.
        for t, b in {(int(t), int(b)) for t, b in zip(lay["tp"][fits], lay["batch"][fits])}:
            rows = fits & (lay["tp"] == t) & (lay["batch"] == b)
            w = Workload(batch=b, seq=seq, tp=t, dtype=dtype, attention=attention)
            times = layer_times(s, w, gpu=gpu, params=params, link_gbs=network.intra_gbs)
            out = step_arrays(times, s, w, pp=lay["pp"][rows], vp=lay["vp"][rows], dp=lay["dp"][rows],
                              ep=lay["ep"][rows], zero=lay["zero"][rows], recompute=lay["recompute"][rows],
                              micro_batches=lay["micro_batches"][rows], network=network, params=params,
                              precision=prec, overlap_dp=overlap_dp)
            for k in parts:
                parts[k][rows] = out[k]
            flops[rows] = (s.num_layers * times.layer_flops + times.outside_flops) * t \
                * lay["micro_batches"][rows] * lay["dp"][rows]
        for i in np.flatnonzero(fits):
            found.append((float(parts["total_ms"][i]), s, {k: int(lay[k][i]) for k in LAYOUT},
                          {k: float(v[i]) for k, v in parts.items()}, {k: float(v[i]) for k, v in mem.items()},
                          float(flops[i])))
    if not considered:
        raise ShapewiseError(_no_layout(shape, gpus=gpus, sequences=sequences, seq=seq,
                                        gpus_per_node=min(gpus_per_node, gpus)))
    found.sort(key=lambda row: row[0])
    peak = gpu.peak_tflops(dtype) * 1e12
    plans = tuple(Plan(s, lay["tp"], lay["pp"], lay["dp"], lay["vp"], lay["ep"], lay["batch"], lay["micro_batches"],
                       RECOMPUTE[lay["recompute"]], lay["zero"], step_ms, global_batch_tokens / (step_ms * 1e-3),
                       flops / (step_ms * 1e-3 * gpus * peak), Memory(**mem), times)
                  for step_ms, s, lay, times, mem, flops in found[:top])
    return PlanResult(plans, considered, fitting, time.perf_counter() - start, gpus, global_batch_tokens, seq,
                      network, model.source)


def _say_absurd_batch(tokens: int, seq: int) -> None:
    """One warning for a global batch past any published one (limits.SANE_BATCH_TOKENS, SANE_BATCH_SEQUENCES):
    priced all the same, each micro-batch a forward and backward run in turn."""
    sequences = tokens // seq
    if tokens > SANE_BATCH_TOKENS or sequences > SANE_BATCH_SEQUENCES:
        warn(f"a global batch of {tokens:,} tokens ({sequences:,} sequences of {seq:,}) is more than sixteen times "
             f"the largest published ({SANE_BATCH_TOKENS // 16:,} tokens; {SANE_BATCH_SEQUENCES // 16:,} sequences): "
             f"priced as given, a step of micro-batches run one after another; {argument('global_batch_tokens')} "
             "counts tokens")


def _no_layout(shape: ModelShape, *, gpus: int, sequences: int, seq: int, gpus_per_node: int) -> str:
    """Why `layouts` found none: t·p·d is the GPUs, t divides the model, p is at most its layers, and
    the data-parallel degree d left over (times a micro-batch of at least 1) must divide the global
    batch's sequences."""
    width = shape.mlp_width
    split = max(t * p for t in _tensor_degrees(shape, gpus=gpus, gpus_per_node=gpus_per_node)
                for p in _pipeline_degrees(shape, gpus=gpus, tp=t))
    dp = gpus // split
    return (f"no layout of {gpus:,} GPUs exists for {shape.name}, whatever the memory: tensor × pipeline degrees "
            f"(t dividing {gpus_per_node} GPUs of a node, the {shape.num_heads} heads, {shape.kv_heads} kv heads and "
            f"FFN width {width}; p at most the {shape.num_layers} layers) cover at most {split} of them, leaving "
            f"data-parallel degrees of {dp:,} or more, none of which divides the global batch's {sequences:,} "
            f"sequences; give a global batch of a multiple of {dp * seq:,} tokens, or another number of GPUs")


# Megatron-LM's precision flags by dtype: fp8 runs its GEMMs in fp8 over bf16 weights (Transformer Engine).
MEGATRON_DTYPE = {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16", "--fp8-format hybrid"], "fp32": [],
                  "tf32": []}


def megatron_flags(p: Plan, *, seq: int, global_batch_tokens: int, dtype: str = "bf16") -> str:
    """The plan as Megatron-LM's command-line flags: the planned model's shape (search.megatron_args: with
    --shapes or --params it may be another than the one asked about), then its layout."""
    from .search import flags_text, megatron_args

    flags = megatron_args(p.shape, Workload(batch=p.batch, seq=seq, tp=p.tp))
    flags += [f"--pipeline-model-parallel-size {p.pp}", f"--global-batch-size {global_batch_tokens // seq}",
              *MEGATRON_DTYPE[dtype]]
    if p.zero == 3 and p.pp > 1:  # plan never makes one; a Plan built by hand may
        raise ShapewiseError(f"{FSDP_WITH_PIPELINE}: give zero 2 or less, or pp 1")
    if p.uneven and p.vp > 1:  # plan never makes one; a Plan built by hand may
        raise ShapewiseError(f"{stages_text(p.stages)} with {p.vp} virtual stages: Megatron-LM takes uneven stages "
                             f"or virtual ones, not both")
    if p.uneven:  # Megatron-LM splits the layers evenly unless told how
        first, *middle, last = p.stages
        heavy = max(p.stages)
        if set(middle) <= {heavy}:  # the middle stages alike: the first's and the last's own counts say it
            flags += ([f"--decoder-first-pipeline-num-layers {first}"] if first != heavy else []) \
                + ([f"--decoder-last-pipeline-num-layers {last}"] if last != heavy else [])
        else:  # stage by stage: E the embedding, t a layer, L the loss (Megatron-LM since mid-2025)
            stages = "|".join("E" * (i == 0) + f"t*{n}" + "L" * (i == p.pp - 1) for i, n in enumerate(p.stages))
            flags.append(f"--pipeline-model-parallel-layout '{stages}'")
    if p.vp > 1:
        flags.append(f"--num-layers-per-virtual-pipeline-stage {p.shape.num_layers // (p.pp * p.vp)}")
    if p.ep > 1:
        flags.append(f"--expert-model-parallel-size {p.ep}")
    if p.recompute == "selective":
        flags.append("--recompute-activations")
    elif p.recompute == "full":
        flags += ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    if p.zero >= 1:
        flags.append("--use-distributed-optimizer")  # ZeRO-1: optimizer state sharded over d
    if p.zero >= 2:  # Megatron-FSDP's strategies: optim_grads is ZeRO-2, optim_grads_params ZeRO-3
        strategy = "optim_grads" if p.zero == 2 else "optim_grads_params"
        flags += ["--use-megatron-fsdp", f"--data-parallel-sharding-strategy {strategy}",
                  "--no-gradient-accumulation-fusion"]
    if p.dp > 1:
        flags += ["--overlap-grad-reduce"] + (["--overlap-param-gather"] if p.zero >= 1 else [])
    return flags_text(flags)


def _duration(seconds: float) -> str:
    """Days, hours, minutes or seconds, each to a tenth: a short run is not "0.0 h"."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:.3g} s"


def train_seconds(p: Plan, *, train_tokens: int, global_batch_tokens: int) -> float:
    """How long training on train_tokens takes: whole steps of the global batch (the last one full, as frameworks
    run it), so 1,000 tokens take one step, not a 65th of one."""
    return math.ceil(train_tokens / global_batch_tokens) * p.step_ms / 1e3


def _step_seconds(seconds: float) -> str:
    """The step column: hundredths of a second, three figures below one (a small model's step is not 0.00)."""
    return f"{seconds:,.2f}" if seconds >= 1 else f"{seconds:.3g}"


TIMES_NOTE = ("compute_ms includes recompute_ms and tp_comm_ms, but for tp_comm_ms's once-a-step all-reduce of the "
              "replicated weights' gradients; total_ms is the step: the parts do not add up to it where they overlap")


def to_json(result: PlanResult, *, train_tokens: int | None = None) -> dict:
    def row(p: Plan) -> dict:
        return {"model": p.shape.name, "params": p.shape.params, "tp": p.tp, "pp": p.pp, "vp": p.vp, "dp": p.dp,
                "ep": p.ep, "micro_batch": p.batch, "micro_batches": p.micro_batches, "recompute": p.recompute,
                "zero": p.zero, "step_ms": p.step_ms, "tokens_per_s": p.tokens_per_s, "mfu": p.mfu,
                "memory_per_gpu_bytes": round(p.memory.total_bytes), "memory_bytes": p.memory.as_dict(),
                "times_ms": p.times_ms, "times_note": TIMES_NOTE, "communication_share": p.communication_share,
                "bubble_share": p.bubble_share, "stage_layers": list(p.stages),
                **({"time_to_train_s": train_seconds(p, train_tokens=train_tokens,
                                                     global_batch_tokens=result.global_batch_tokens)}
                   if train_tokens else {})}

    return {"gpus": result.gpus, "global_batch_tokens": result.global_batch_tokens, "seq": result.seq,
            "network": result.network.source, "cost_model": result.cost_source, "considered": result.considered,
            "fitting": result.fitting, "seconds": result.seconds, "plans": [row(p) for p in result.plans]}


def render(result: PlanResult, console, *, gpu: GPU, train_tokens: int | None = None) -> None:
    from rich.table import Table

    console.print(f"{result.considered:,} layouts of {result.gpus:,} {gpu.key} GPU{'s' * (result.gpus > 1)} considered, {result.fitting:,} fit "
                  f"in {capacity_bytes(gpu) / 2**30:,.1f} GiB, in {result.seconds:.2f} s; global batch "
                  f"{result.global_batch_tokens:,} tokens of {result.seq}; network: {result.network.source}; "
                  f"cost model: {result.cost_source}")
    if not result.plans:
        console.print(f"[red]None of the {result.considered:,} layouts fits in memory, one sequence a micro-batch "
                      "among them: more GPUs, a shorter sequence or a GPU with more memory.[/red]")
        return
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    columns = ["#", "model", "layout (t p×v d e b m)", "step s", "tokens/s", "MFU", "memory GiB",
               "weights/grads/optim/act/loss/alloc", "comm", "bubble"] + (["to train"] if train_tokens else [])
    for col in columns:
        table.add_column(col, justify="left" if col in ("model", "layout (t p×v d e b m)") else "right")
    for i, p in enumerate(result.plans, 1):
        m = p.memory
        split = "/".join([f"{v / 2**30:.1f}" for v in (m.weights, m.grads, m.optimizer)]
                         + (["–", "–"] if m.peak_at_step else [f"{v / 2**30:.1f}" for v in (m.activations, m.loss)])
                         + [f"{m.allocator / 2**30:.1f}"])  # the parts add to the total
        table.add_row(str(i), p.shape.name, p.layout_text(), _step_seconds(p.step_ms / 1e3), f"{p.tokens_per_s:,.0f}",
                      f"{p.mfu:.1%}", f"{m.total_bytes / 2**30:,.1f}", split, f"{p.communication_share:.1%}",
                      f"{p.bubble_share:.1%}", *([_duration(train_seconds(p, train_tokens=train_tokens, global_batch_tokens=result.global_batch_tokens))]
                        if train_tokens else []))
    console.print(table)
    uneven: dict[tuple[int, ...], list[int]] = {}  # each split, the plans on it
    for i, p in enumerate(result.plans, 1):
        if p.uneven:
            uneven.setdefault(p.stages, []).append(i)
    for stages, rows in uneven.items():
        heavy = max(stages)
        console.print(f"{', '.join(f'#{i}' for i in rows)} stages={stages_text(stages)}: {len(stages)} pipeline stages "
                      f"do not divide the {sum(stages)} layers, so the stages hold these layers, first to last (n×k: k "
                      f"stages of n); the slowest stage (a {heavy}-layer one, or an end one with the embedding or the "
                      f"output layer) sets the pace, and memory is the fullest stage's, with its own layers. The "
                      f"framework must be given this split: --emit megatron prints Megatron-LM's flags")
    if any(p.memory.peak_at_step for p in result.plans):
        console.print("act/loss –: the peak is at the optimizer step, after the backward has freed the activations "
                      "and the loss's buffers (the step's temporaries count in optim)")
