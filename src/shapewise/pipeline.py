"""Pipeline parallelism of our own: the 1F1B and interleaved 1F1B schedules, their slot-level
timeline, and a runner over torch.distributed send/recv (gloo on the CPU, NCCL on GPUs).

A model of L layers is cut into p·v chunks (virtual stages); rank r holds chunks r, r + p, …
(Megatron's layout: virtual stage j = c·p + r for the rank's chunk c). Virtual stage 0 holds the
embedding, the last the final norm, the output layer and the loss. Each rank runs its own list of
actions, F(micro-batch, chunk) and B(micro-batch, chunk):

- 1F1B (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
  Using Megatron-LM", arXiv:2104.04473, section 2.2.1; PipeDream-Flush): rank r runs p−r−1 warm-up
  forwards, then alternates one forward and one backward, then drains the remaining backwards;
- interleaved 1F1B (their section 2.2.2, Megatron-LM's forward_backward_pipelining_with_interleaving):
  rank r runs 2(p−r−1) + (v−1)·p warm-up forwards, chunks taken in groups of p micro-batches.

With a forward of f and a backward of b per chunk, both leave every rank idle for (p−1)(f+b): (p−1)/v
of a stage's time for one micro-batch (v chunks), the bubble (p−1)/(v·m) of the step that
parallel.step_arrays prices. simulate() counts those idle slots from the dependencies alone; the
runner counts them again from the run itself, a logical clock carried with every message.

torch is imported only inside functions.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

from .errors import ShapewiseError

FORWARD, BACKWARD = "F", "B"
SLOT_COSTS = (1, 2)  # slots of one chunk's forward and backward: a backward does about twice the work


@dataclass(frozen=True)
class Action:
    kind: str  # FORWARD or BACKWARD
    micro_batch: int
    chunk: int  # the rank's model chunk, 0..v-1

    def __str__(self) -> str:
        return f"{self.kind}{self.micro_batch}" + (f".{self.chunk}" if self.chunk else "")


@dataclass(frozen=True)
class Layout:
    """p stages of v chunks each over m micro-batches."""

    stages: int
    micro_batches: int
    virtual: int = 1

    def __post_init__(self):
        for name in ("stages", "micro_batches", "virtual"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ShapewiseError(f"pipeline: {name} must be a positive whole number, got {value!r}")
        if self.virtual > 1 and self.micro_batches % self.stages:
            raise ShapewiseError(f"the interleaved schedule takes micro-batches in groups of the {self.stages} stages: "
                                 f"give a multiple of {self.stages} micro-batches, not {self.micro_batches}")

    @property
    def chunks(self) -> int:
        return self.stages * self.virtual

    def virtual_stage(self, rank: int, chunk: int) -> int:
        return chunk * self.stages + rank

    def rank_of(self, virtual_stage: int) -> int:
        return virtual_stage % self.stages

    @property
    def bubble_slots(self) -> int:
        """Idle slots per rank by the formula: (p−1)/v of a stage's time for one micro-batch, which
        is v chunks' forward and backward: (p−1)(f+b) slots whatever v."""
        return (self.stages - 1) * sum(SLOT_COSTS)


def schedule(layout: Layout) -> tuple[tuple[tuple[Action, ...], ...], ...]:
    """Each rank's steps in the order it runs them; a step is one action, or in the interleaved
    schedule's steady phase a forward and a backward run back to back (Megatron's grouping: the
    step's inputs are received together before it, its outputs sent together after it, which keeps
    the exchanges free of deadlocks; see check_exchanges)."""
    p, m, v = layout.stages, layout.micro_batches, layout.virtual
    ranks = []
    for r in range(p):
        if v == 1:
            warmup = min(p - r - 1, m)
            forwards = [Action(FORWARD, i, 0) for i in range(m)]
            backwards = [Action(BACKWARD, i, 0) for i in range(m)]
        else:
            total = m * v
            warmup = min(2 * (p - r - 1) + (v - 1) * p, total)
            # The k-th forward runs chunk (k mod pv) // p of micro-batch (k // pv)·p + k mod p: p micro-batches
            # through one chunk, then the same p through the next; backwards take the chunks in reverse.
            group = lambda k: (k // (p * v)) * p + k % p
            forwards = [Action(FORWARD, group(k), (k % (p * v)) // p) for k in range(total)]
            backwards = [Action(BACKWARD, group(k), v - 1 - (k % (p * v)) // p) for k in range(total)]
        steady = [(f, backwards[i]) for i, f in enumerate(forwards[warmup:])]
        if v == 1:  # 1F1B sends each output as soon as it is made
            steady = [(a,) for pair in steady for a in pair]
        steps = [(f,) for f in forwards[:warmup]] + steady + [(b,) for b in backwards[len(forwards) - warmup:]]
        ranks.append(tuple(steps))
    return tuple(ranks)


# ---- dependencies and messages ----

def _needs(layout: Layout, rank: int, a: Action) -> tuple[int, Action] | None:
    """The (rank, action) whose output this action consumes, None for the pipeline's ends' own inputs."""
    j, last = layout.virtual_stage(rank, a.chunk), layout.chunks - 1
    if a.kind == FORWARD:
        return None if j == 0 else (layout.rank_of(j - 1), Action(FORWARD, a.micro_batch, (j - 1) // layout.stages))
    if j == last:  # the loss's backward starts from the same rank's own forward
        return rank, Action(FORWARD, a.micro_batch, a.chunk)
    return layout.rank_of(j + 1), Action(BACKWARD, a.micro_batch, (j + 1) // layout.stages)


def _sends_to(layout: Layout, rank: int, a: Action) -> int | None:
    """The rank this action's output goes to, None where it stays (the last forward, the first backward)."""
    j = layout.virtual_stage(rank, a.chunk)
    if a.kind == FORWARD:
        return None if j == layout.chunks - 1 else layout.rank_of(j + 1)
    return None if j == 0 else layout.rank_of(j - 1)


@dataclass(frozen=True)
class Timeline:
    """Slot-level times of a schedule: a step starts when its rank is free and every input it receives
    has been sent; its outputs leave when it ends."""

    start: tuple[tuple[int, ...], ...]  # per rank, per step
    busy: tuple[int, ...]  # slots each rank computes
    makespan: int

    def idle(self, rank: int) -> int:
        return self.makespan - self.busy[rank]


def step_slots(step: tuple[Action, ...]) -> int:
    return sum(SLOT_COSTS[a.kind == BACKWARD] for a in step)


def simulate(layout: Layout) -> Timeline:
    """Play the schedule with SLOT_COSTS per action and instant messages."""
    ranks = schedule(layout)
    sent: dict[tuple[int, Action], int] = {}  # when each action's output left its rank
    starts: list[list[int]] = [[] for _ in ranks]
    clock = [0] * len(ranks)
    progressed = True
    while progressed:
        progressed = False
        for r, steps in enumerate(ranks):
            while len(starts[r]) < len(steps):
                step = steps[len(starts[r])]
                needs = [n for n in (_needs(layout, r, a) for a in step) if n and n[0] != r]
                if any(n not in sent for n in needs):
                    break
                start = max([clock[r]] + [sent[n] for n in needs])
                starts[r].append(start)
                clock[r] = start + step_slots(step)
                sent.update({(r, a): clock[r] for a in step})
                progressed = True
    stuck = [r for r, steps in enumerate(ranks) if len(starts[r]) < len(steps)]
    assert not stuck, f"rank {stuck[0]} waits forever at step {len(starts[stuck[0]])}"  # schedule() is valid
    busy = tuple(sum(map(step_slots, steps)) for steps in ranks)
    return Timeline(tuple(map(tuple, starts)), busy, max(clock))


@dataclass(frozen=True)
class Message:
    """One tensor between two ranks: an activation forward or its gradient back, tagged by what made it."""

    src: int
    dst: int
    kind: str
    micro_batch: int
    virtual_stage: int  # of the action that made it


def step_messages(layout: Layout, rank: int, step: tuple[Action, ...]) -> tuple[list, list]:
    """(receives before the step, sends after it), each a list of (action, Message)."""
    recvs, sends = [], []
    for a in step:
        need = _needs(layout, rank, a)
        if need and need[0] != rank:
            recvs.append((a, Message(need[0], rank, need[1].kind, a.micro_batch,
                                     layout.virtual_stage(need[0], need[1].chunk))))
        dst = _sends_to(layout, rank, a)
        if dst is not None:
            sends.append((a, Message(rank, dst, a.kind, a.micro_batch, layout.virtual_stage(rank, a.chunk))))
    return recvs, sends


def exchanges(layout: Layout) -> tuple[tuple[tuple, ...], ...]:
    """Per rank, the batches of sends and receives it posts and waits for: before each step, the
    previous step's outputs and this step's inputs (Megatron and torch fuse a send with the next
    receive in the same way, so that two neighbours sending to each other do not wait on each other);
    one last batch for the last step's outputs. Each item is ("send"|"recv", Message)."""
    out = []
    for r, steps in enumerate(schedule(layout)):
        batches, pending = [], []
        for step in steps:
            recvs, sends = step_messages(layout, r, step)
            batches.append(tuple(pending + [("recv", m) for _, m in recvs]))
            pending = [("send", m) for _, m in sends]
        batches.append(tuple(pending))
        out.append(tuple(batches))
    return tuple(out)


def check_exchanges(batches: tuple[tuple[tuple, ...], ...]) -> None:
    """Raise unless the messages between each pair of ranks arrive in the order they are expected
    (NCCL matches sends and receives in order, not by tag) and every rank finishes when a batch
    completes only once each of its sends and receives is matched by the peer's posted batch
    (the strictest reading of batch_isend_irecv(...).wait())."""
    where: dict[tuple, list] = {}  # (op, src, dst) -> [(rank's batch index, message)] in posting order
    for r, rank_batches in enumerate(batches):
        for k, batch in enumerate(rank_batches):
            for op, msg in batch:
                where.setdefault((op, msg.src, msg.dst), []).append((k, msg))
    partner: dict[tuple, int] = {}  # (rank, op, src, dst, i) -> the peer's batch index
    for src, dst in {(src, dst) for _, src, dst in where}:
        sends, recvs = where.get(("send", src, dst), []), where.get(("recv", src, dst), [])
        if [m for _, m in sends] != [m for _, m in recvs]:
            raise ShapewiseError(f"pipeline messages from rank {src} to rank {dst} do not match in order "
                                 "(NCCL pairs sends and receives in order)")
        for i, ((ks, _), (kr, _)) in enumerate(zip(sends, recvs)):
            partner[(src, "send", src, dst, i)] = kr
            partner[(dst, "recv", src, dst, i)] = ks
    # Which batch each of a rank's ops sits in, with its index among the ops of its (op, src, dst).
    ops_of: list[list[list[tuple[int, tuple]]]] = []
    for r, rank_batches in enumerate(batches):
        seen: dict[tuple, int] = {}
        rows = []
        for batch in rank_batches:
            row = []
            for op, msg in batch:
                key = (op, msg.src, msg.dst)
                i = seen.get(key, 0)
                seen[key] = i + 1
                peer = msg.dst if op == "send" else msg.src
                row.append((peer, (r, op, msg.src, msg.dst, i)))
            rows.append(row)
        ops_of.append(rows)
    current = [0] * len(batches)
    progressed = True
    while progressed:
        progressed = False
        for r, rows in enumerate(ops_of):
            while current[r] < len(rows) and all(partner[key] <= current[peer] for peer, key in rows[current[r]]):
                current[r] += 1
                progressed = True
    stuck = [r for r, rows in enumerate(ops_of) if current[r] < len(rows)]
    if stuck:
        raise ShapewiseError(f"pipeline exchanges deadlock: rank {stuck[0]} waits in batch {current[stuck[0]]}")


# ---- running it: torch, on the ranks of a process group ----

@functools.cache
def _chunk_class():
    import torch
    from torch import nn

    from .layers import make_norm

    class Chunk(nn.Module):
        """Consecutive decoder blocks; the first chunk embeds tokens, the last adds the final norm and
        the output layer (untied: a pipeline keeps the input and output embeddings on different ranks)."""

        def __init__(self, shape, blocks, *, first: bool, last: bool, **factory):
            super().__init__()
            h = shape.hidden
            self.embed = nn.Embedding(shape.vocab, h, **factory) if first else None
            self.positions = nn.Embedding(shape.learned_positions, h, **factory) \
                if first and shape.learned_positions else None
            self.blocks = nn.ModuleList(blocks)
            self.norm = make_norm(shape, **factory) if last else None
            self.head = nn.Linear(h, shape.vocab, bias=False, **factory) if last else None

        def forward(self, x):
            if self.embed is not None:
                x = self.embed(x)
                if self.positions is not None:
                    # Past the table the rows wrap (verify.model_block's way): the same work, where an index past
                    # it would stop the step (rules warn that the model cannot run such a sequence)
                    x = x + self.positions(torch.arange(x.shape[1], device=x.device) % self.positions.num_embeddings)
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x)) if self.head is not None else x

    return Chunk


def build_chunk(shape, layout: Layout, virtual_stage: int, *, device="cpu", dtype="fp32", attention="flash",
                seed: int = 0):
    """Virtual stage j's chunk of `shape`: layers j·L/(pv) … (j+1)·L/(pv) − 1, each drawn from seed + its
    index (shapewise.layers.build_layer), so that any split of one seed holds the same weights."""
    import torch

    from .dtypes import torch_dtype
    from .layers import build_layer

    if shape.num_layers % layout.chunks:
        raise ShapewiseError(f"{shape.name}'s {shape.num_layers} layers do not split into {layout.stages} stages "
                             f"× {layout.virtual} chunks; choose stages and chunks whose product divides them")
    per = shape.num_layers // layout.chunks
    blocks = [build_layer(shape, device=device, dtype=dtype, attention=attention, seed=seed + i)
              for i in range(virtual_stage * per, (virtual_stage + 1) * per)]
    chunk = _chunk_class()(shape, blocks, first=virtual_stage == 0, last=virtual_stage == layout.chunks - 1,
                           device=device, dtype=torch_dtype(dtype))
    gen = torch.Generator(device=torch.device(device)).manual_seed(seed + 1_000_003)
    with torch.no_grad():  # the ends' weights, from their own stream so that both ends are drawn the same
        for name in ("embed", "positions", "head"):
            module = getattr(chunk, name)
            if module is not None:
                w = torch.empty(module.weight.shape, device=device, dtype=torch.float32)
                module.weight.copy_(w.normal_(0.0, 0.02, generator=gen))
    return chunk


def micro_batch_loss(logits, targets, micro_batches: int):
    """Mean cross-entropy of one micro-batch over m: the m losses add up to the whole batch's mean."""
    import torch.nn.functional as F

    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten()) / micro_batches


@dataclass(frozen=True)
class Trace:
    """What one rank did in one run of the schedule."""

    rank: int
    actions: tuple[Action, ...]  # in the order they ran
    slot_start: tuple[int, ...]  # each step's start on the logical clock the messages carry
    slot_busy: int
    slot_end: int  # the logical clock when this rank finished
    busy_s: float  # wall time computing
    wall_s: float  # wall time from the start to this rank's last exchange
    loss: float  # the losses this rank computed (the last stage's), summed

    def idle_slots(self, makespan: int) -> int:
        return makespan - self.slot_busy


def run(chunks, layout: Layout, *, rank: int, tokens=None, targets=None, ranks: tuple[int, ...] | None = None,
        act_shape: tuple[int, ...], device="cpu") -> Trace:
    """Run this rank's schedule once over the process group already set up: forward and backward of
    every micro-batch through `chunks` (this rank's, chunk c being virtual stage c·p + rank), gradients
    accumulated in the chunks' parameters. tokens[i] and targets[i] are micro-batch i's token ids (the
    first stage's input) and next tokens (the last stage's); act_shape is (batch, seq, hidden), what
    travels between stages. ranks maps stages to process-group ranks (default 0 … p−1).

    Every message carries, beside the tensor, the logical time its step ended (SLOT_COSTS per
    action): a step starts on that clock at the latest of its rank's clock and its inputs' times, so
    the idle slots counted from a real run show whether it ran the schedule simulate() plays."""
    import torch
    import torch.distributed as dist

    ranks = tuple(ranks or range(layout.stages))
    cuda = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    dtype = next(chunks[0].parameters()).dtype
    last = layout.chunks - 1
    kept: dict[tuple[int, int], tuple] = {}  # (micro-batch, chunk) -> (input, output or loss)
    received: dict[tuple[str, int, int], object] = {}  # (kind, micro-batch, chunk) -> the tensor it consumes
    clock, loss_sum, busy_s, done, starts, pending = 0, 0.0, 0.0, [], [], []
    sync()
    begin = time.perf_counter()

    def exchange(sends, recvs) -> int:
        """Post the previous step's sends and this step's receives in one batch and wait for all."""
        ops, stamps = [], []
        for tensor, stamp, msg in sends:
            ops += [dist.P2POp(dist.isend, tensor, ranks[msg.dst]), dist.P2POp(dist.isend, stamp, ranks[msg.dst])]
        for a, msg in recvs:
            buffer = torch.empty(act_shape, device=device, dtype=dtype)
            stamp = torch.zeros(1, device=device, dtype=torch.float64)
            ops += [dist.P2POp(dist.irecv, buffer, ranks[msg.src]), dist.P2POp(dist.irecv, stamp, ranks[msg.src])]
            received[(a.kind, a.micro_batch, a.chunk)] = buffer
            stamps.append(stamp)
        if ops:
            for work in dist.batch_isend_irecv(ops):
                work.wait()
            sync()
        return int(max((s.item() for s in stamps), default=0))

    for step in schedule(layout)[rank]:
        recvs, sends_after = step_messages(layout, rank, step)
        ready = exchange(pending, recvs)
        start = max(clock, ready)
        starts.append(start)
        clock = start + step_slots(step)
        t0 = time.perf_counter()
        outputs = {}
        for a in step:
            j = layout.virtual_stage(rank, a.chunk)
            if a.kind == FORWARD:
                x = tokens[a.micro_batch] if j == 0 else received.pop((a.kind, a.micro_batch, a.chunk)).requires_grad_()
                y = chunks[a.chunk](x)
                if j == last:
                    y = micro_batch_loss(y, targets[a.micro_batch], layout.micro_batches)
                    loss_sum += float(y.detach())
                kept[(a.micro_batch, a.chunk)] = (x, y)
                outputs[a] = y.detach()
            else:
                x, y = kept.pop((a.micro_batch, a.chunk))
                if j == last:
                    y.backward()
                else:
                    torch.autograd.backward(y, received.pop((a.kind, a.micro_batch, a.chunk)))
                outputs[a] = x.grad if j else None
            done.append(a)
        sync()
        busy_s += time.perf_counter() - t0
        stamp = torch.full((1,), float(clock), device=device, dtype=torch.float64)
        pending = [(outputs[a], stamp, msg) for a, msg in sends_after]
    exchange(pending, [])
    assert not kept and not received, "the schedule left work undone"
    return Trace(rank, tuple(done), tuple(starts), sum(map(step_slots, schedule(layout)[rank])), clock, busy_s,
                 time.perf_counter() - begin, loss_sum)
