"""Bounds on every number a user gives: flags, config fields, profile values and sweep ranges.

Each bound is a named Limit with its reason beside it, and the message that refuses a number says
what the bound is and why, in one line. The bounds are set by what shapewise can honestly price and
by the memory pricing takes: a model whose single weight outgrows every GPU in the table is not a
shape anyone runs, and a sweep of a billion values would need gigabytes to price at once.
"""

from __future__ import annotations

import argparse
import math
import numbers
from dataclasses import dataclass

from .errors import ShapewiseError


@dataclass(frozen=True)
class Limit:
    """A range a number must fall in. `whole`: an integer; `low_open`: low itself is excluded."""

    what: str  # as the message names it: "the sequence length"
    low: float
    high: float
    whole: bool = True
    low_open: bool = False
    reason: str = ""  # why the bound, short: the message carries it

    def range_text(self) -> str:
        if self.high == math.inf:
            return f"{'above' if self.low_open else 'at least'} {_number(self.low)}"
        return f"{'above' if self.low_open else 'from'} {_number(self.low)} {'and at most' if self.low_open else 'to'} " \
               f"{_number(self.high)}"

    def high_text(self) -> str:
        """The upper bound as messages write it: "1,048,576 = 2^20"."""
        return _number(self.high)

    @property
    def kind(self) -> str:
        if self.whole and self.low == 1 and not self.low_open:  # 1 to N: "positive" is the word people look for
            return "a positive whole number"
        return "a whole number" if self.whole else "a number"

    def check(self, value, name: str = "") -> int | float:
        """The value as an int (whole) or float, or a ShapewiseError naming `name` (a flag or a
        field) and the bound. Text is read as a number: "7e9" is 7,000,000,000."""
        where = f"{name}: " if name else ""
        kind = self.kind
        number = _read(value, kind, self.what, where)
        given = _shown(value.strip() if isinstance(value, str) else value)  # as read: "0\n" is said as 0, on one line
        if isinstance(number, float) and not math.isfinite(number):  # an int is finite, and may outgrow a float
            raise ShapewiseError(f"{where}{self.what} must be a finite number {self.range_text()}, got {given}")
        if self.whole and number != int(number):
            raise ShapewiseError(f"{where}{self.what} must be a whole number, got {given}")
        too_low = number <= self.low if self.low_open else number < self.low
        if too_low or number > self.high:
            why = f" ({self.reason})" if self.reason and number > self.high else ""
            raise ShapewiseError(f"{where}{self.what} must be {kind} {self.range_text()}{why}, got {given}")
        return int(number) if self.whole else float(number)

    def keyword(self, value, name: str) -> int | float:
        """A Python caller's keyword argument `name`, named as the caller wrote it (top, not --top): the
        same check, less the reading of text, which is the flags' (arg): a number given as "1e9" is refused,
        as Workload and predict_gemm refuse one. A whole number must be an integer (numpy's too): 3.0 is
        refused, as Workload(seq=2048.0) is, since a float where a count is meant is most often a quotient
        that was not rounded, and rounding it here would guess which way."""
        if isinstance(value, str):
            raise ShapewiseError(f"{name}: {self.what} must be {self.kind}, not text, got {_shown(value)!r}")
        if self.whole and isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) \
                and math.isfinite(value) and value == int(value):  # (2.5 and NaN are refused as the flags' are)
            raise ShapewiseError(f"{name}: {self.what} must be {self.kind} given as an int, got {_shown(value)}")
        return self.check(value, name)

    def arg(self, text: str) -> int | float:
        """For argparse's type=: the same check, as the error argparse prints in one line."""
        try:
            return self.check(text)
        except ShapewiseError as err:
            raise argparse.ArgumentTypeError(str(err)) from None


def _number(x: float) -> str:
    if x == int(x):
        x = int(x)
        power = x.bit_length() - 1
        if x >= 2**16 and x in (2**power, 2**(power + 1) - 1):
            exact = "2^" + str(power) if x == 2**power else f"2^{power + 1}-1"
            return f"{x:,} = {exact}"
        return f"{x:,}"
    return f"{x:g}"


def _shown(value) -> str:
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _read(value, kind: str, what: str, where: str) -> float | int:
    """An int or float from a JSON value, a flag's text or a caller's number (numpy's np.int64(4) and
    np.float32(0.5) as Python's); bool, None and other types refused."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):  # numpy's bool is no numbers.Real
        raise ShapewiseError(f"{where}{what} must be {kind}, got {_shown(value)!s} ({type(value).__name__})")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    text = value.strip().replace("_", "")
    try:
        return int(text)  # exact, however long: the range check refuses what is too large
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise ShapewiseError(f"{where}{what} must be {kind}, got {_shown(value)!r}") from None


# ---- the bounds ------------------------------------------------------------------------------
# Model widths: one square weight of 2^20 × 2^20 is 2 TiB in bf16, more than ten times the memory
# of the largest GPU in the table (tests/test_limits.py checks that it stays so): no such layer runs.
WIDTH_MAX = 2**20
_WIDTH_REASON = "a square weight of 2^20 is 2 TiB in bf16, beyond every GPU's memory"
HIDDEN = Limit("the hidden size", 1, WIDTH_MAX, reason=_WIDTH_REASON)
FFN = Limit("the FFN width", 1, WIDTH_MAX, reason=_WIDTH_REASON)
HEAD_DIM = Limit("the head dim", 1, WIDTH_MAX, reason=_WIDTH_REASON)
HEADS = Limit("the number of heads", 1, WIDTH_MAX, reason="each head is at least one column of the hidden size")
# 2^24 tokens: 64 times the largest vocab of the presets (256,000), and still one GEMM dim that fits
# cuBLAS's 32-bit ints many times over.
VOCAB = Limit("the vocab size", 1, 2**24, reason="64 times the largest vocab of any preset")
# Layers and experts multiply ops priced once, so their count costs nothing to price; 2^16 is over
# 600 times the deepest preset's 96 layers and keeps parameter counts far inside float64's exact range.
LAYERS = Limit("the number of layers", 1, 2**16, reason="over 600 times the deepest preset")
EXPERTS = Limit("the number of experts", 0, 2**16, reason="ops are priced per expert kind; more is no model")

# Sequence and batch. The fused-attention model walks the query blocks of a sequence: 2^24 tokens
# are 131,072 blocks of 128, priced in well under a second and a few MB; time and memory grow with it.
SEQ = Limit("the sequence length", 1, 2**24, reason="pricing attention walks the sequence block by block")
BATCH = Limit("the batch", 1, 2**24, reason="tokens per step beyond it are no GEMM cuBLAS runs")
# b·s is the M of every GEMM of the step, and cuBLAS takes GEMM dims as 32-bit ints (cublasGemmEx's
# m, n, k are `int`), so no step of more tokens runs as the GEMMs priced here.
TOKENS = Limit("the tokens per step (batch × sequence length)", 1, 2**31 - 1,
               reason="a GEMM dim is a 32-bit int in cuBLAS")
TP = Limit("the tensor-parallel degree", 1, 2**16, reason="it must divide the heads, and no group is larger")

# The fields of shapes.ModelShape and shapes.Workload, each with its bound (checked on construction).
FIELDS = {"hidden": HIDDEN, "num_layers": LAYERS, "num_heads": HEADS, "num_kv_heads": HEADS, "head_dim": HEAD_DIM,
          "ffn": FFN, "expert_ffn": FFN, "vocab": VOCAB, "learned_positions": SEQ, "num_experts": EXPERTS,
          "top_k": EXPERTS, "num_shared_experts": EXPERTS, "batch": BATCH, "seq": SEQ, "tp": TP}

# One GEMM dim, as bench and plot take them: a 32-bit int in cuBLAS's API, as above.
GEMM_DIM = Limit("a GEMM dim", 1, 2**31 - 1, reason="a GEMM dim is a 32-bit int in cuBLAS")
# A sweep's values are priced (or measured) all at once: 65,536 are a few MB to price, and at ~13 ms
# a case already 15 minutes of a GPU.
SWEEP_VALUES = Limit("the values of one sweep", 1, 2**16, reason="priced at once; split a longer sweep")
# And its cases, every value of each flag with every other's (-m × -n × -k × layouts): 2^20 at ~13 ms a case
# are four hours of a GPU, and are made in seconds; 4000 values of each of three flags would be days to make.
SWEEP_CASES = Limit("the cases of one sweep", 1, 2**20, reason="at about 13 ms a case, four hours of a GPU")
# Collective sizes: 2^40 bytes (1 TiB) is beyond the memory of every GPU in the table.
COMM_BYTES = Limit("a collective's size in bytes", 1, 2**40, reason="1 TiB, beyond every GPU's memory")

# Search and suggest. A relative tolerance of 1 would admit a model of no parameters at all.
PARAMS = Limit("the parameter budget", 0, 1e15, whole=False, low_open=True,
               reason="search's grid ends far below it (hidden 32,768, 256 layers)")
PARAMS_TOL = Limit("the parameter tolerance", 0, 0.5, whole=False, low_open=True,
                   reason="a relative tolerance; 0.5 already admits half or one and a half the size")
ASPECT_BAND = Limit("the aspect band", 1, 100, whole=False,
                    reason="a factor on hidden/layers; beyond 100 it no longer limits anything")
ASPECT = Limit("hidden/layers", 0, 32768, whole=False, low_open=True,
               reason="search's widest hidden over one layer")
TOP = Limit("how many to show", 1, 10_000, reason="more rows than anyone reads")
# A count a flag gives that no bound above says more about (GPUs in a cluster, tokens in a batch):
# kept within a 32-bit int, the width cuBLAS and NCCL count elements in.
COUNT = Limit("the count", 1, 2**31 - 1, reason="a 32-bit int")
# A step's global batch (plan's --global-batch). The largest published run a few million to tens of millions of
# tokens (GPT-3's 3.2M, Brown et al. 2020, Table 2.1; Llama 3 405B's 16M, Dubey et al. 2024, section 3.4.1) and
# tens of thousands of sequences (BERT in 76 minutes: 65,536 of 128, You et al. 2019). Sixteen times either is
# still priced, as arithmetic it is, but with a warning: a slip of the exponent, or sequences given as tokens.
SANE_BATCH_TOKENS = 2**28
SANE_BATCH_SEQUENCES = 2**20
RATE = Limit("the rate", 0, 1e9, whole=False, low_open=True, reason="a billion per second or per step")
TOKENS_TO_TRAIN = Limit("the tokens to train on", 1, 1e16,
                        reason="ten quadrillion; a larger count is a slip of the exponent")
ROUNDS = Limit("the rounds", 1, 10_000, reason="each round measures every candidate once")
SEED = Limit("the seed", 1, 2**31 - 1, reason="numpy seeds are 32-bit")

# Timing: a case measured for more than a minute is no benchmark, and a sweep would run for days.
WARMUP_MS = Limit("the warm-up time in ms", 0, 60_000, whole=False, reason="a minute per case")
BUDGET_MS = Limit("the timing budget in ms", 0, 60_000, whole=False, low_open=True, reason="a minute per case")
CALLS = Limit("the calls per case", 1, 100_000, reason="a fixed count every rank runs: 100,000 is minutes")


def flag(value, name: str) -> bool:
    """A switch a function takes: True or False (numpy's too), never a truthy "no" read as yes."""
    if type(value) is bool or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool", "bool_")):
        return bool(value)
    raise ShapewiseError(f"{name} must be True or False, got {_shown(repr(value))}")


# A decode step's GEMMs take one token a sequence; b·s is its KV cache, whose tokens FlashAttention's variable-length
# kernels (as serving engines run a batch of caches) index by 32-bit offsets (cu_seqlens_k is int32).
CACHE_TOKENS = Limit("the KV cache's tokens (batch × sequence length: the sequences served, each its cache of seq "
                     "tokens)", 1, 2**31 - 1, reason="FlashAttention's variable-length kernels index a batch's "
                     "cache by 32-bit offsets")


def check_tokens(batch: int, seq: int, names: tuple[str, str], mode: str = "train") -> None:
    """batch × seq within TOKENS (a decode step's cache within CACHE_TOKENS), or a ShapewiseError naming the two
    as `names` does: the Workload's fields, or the flags that set them (each already within BATCH and SEQ)."""
    limit = CACHE_TOKENS if mode == "decode" else TOKENS
    if batch * seq > limit.high:
        raise ShapewiseError(f"{names[0]} {batch} × {names[1]} {seq} = {batch * seq:,} tokens: {limit.what} must be "
                             f"at most {limit.high:,} ({limit.reason})")


def dims(values: list[str], *, name: str, limit: Limit = GEMM_DIM) -> list[int]:
    """Numbers and inclusive ranges START:STOP:STEP (or START:STOP, step 1) from the command line,
    each within `limit`, at most SWEEP_VALUES of them in all (counted before any is made), in the
    order given without repeats."""
    found: list[int] = []
    count = 0
    for value in values:
        parts = value.split(":")
        if len(parts) not in (1, 2, 3):
            raise ShapewiseError(f"{name}: {value!r} is not a number or a START:STOP:STEP range")
        backwards = f"{name}: range {value!r} needs START <= STOP and a positive STEP"
        if len(parts) > 1 and all(map(_is_number, parts[:2])) and _read_number(parts[1]) < _read_number(parts[0]):
            raise ShapewiseError(backwards)  # said as the range's fault before its STOP is checked as a dim (1:0)
        try:
            numbers = [limit.check(p) for p in parts[:2]] + [int(parts[2]) if len(parts) == 3 else 1]
        except ValueError as err:  # ShapewiseError included
            if isinstance(err, ShapewiseError) and all(_is_number(p) for p in parts):
                raise ShapewiseError(f"{name}: {err}") from None
            raise ShapewiseError(f"{name}: {value!r} is not a number or a START:STOP:STEP range of whole numbers") from None
        if len(parts) == 1:
            span = range(numbers[0], numbers[0] + 1)
        else:
            start, stop, step = numbers
            if step <= 0 or stop < start:
                raise ShapewiseError(backwards)
            span = range(start, stop + 1, step)
        count += len(span)  # len of a range is known without making it
        if count > SWEEP_VALUES.high:
            raise ShapewiseError(f"{name}: {SWEEP_VALUES.what} must be at most {SWEEP_VALUES.high_text()} "
                                 f"({SWEEP_VALUES.reason}), got {count:,} or more")
        found.extend(span)
    if not found:
        raise ShapewiseError(f"{name}: give at least one value")
    return list(dict.fromkeys(found))


def _read_number(text: str) -> float:
    return float(text.replace("_", ""))


def _is_number(text: str) -> bool:
    try:
        _read_number(text)
    except ValueError:
        return False
    return True


SIZE_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def sizes(values: list[str], *, name: str = "--sizes") -> list[int]:
    """Bytes from the command line: 4096, 64K, 1M, and START:STOP ranges that double (1K:1G)."""
    def read(given: str) -> float:
        text = given.strip().upper().removesuffix("B")
        unit = text[-1] if text and text[-1] in SIZE_UNITS else ""
        try:
            return float(text[: len(text) - len(unit)].replace("_", "")) * SIZE_UNITS[unit]
        except ValueError:
            raise ShapewiseError(f"{name}: {text!r} is not a size such as 4096, 64K, 16M or 1G") from None

    def one(given: str) -> int:
        number = read(given)
        if math.isfinite(number) and number >= 1:
            number = int(number)
        try:
            return COMM_BYTES.check(number)
        except ShapewiseError as err:  # named as typed (0K, not the 0.0 it was read as)
            raise ShapewiseError(f"{name}: {str(err).rsplit(', got ', 1)[0]}, got {given.strip()}") from None

    found: list[int] = []
    for value in values:
        if ":" in value:
            parts = value.split(":", 1)
            if read(parts[1]) < read(parts[0]):  # the range's fault before its STOP is checked as a size (1K:0)
                raise ShapewiseError(f"{name}: range {value!r} needs START <= STOP")
            low, high = (one(part) for part in parts)
            while low <= high:  # doubling from at least 1 up to at most 2^40: at most 41 sizes
                found.append(low)
                low *= 2
        else:
            found.append(one(value))
    return list(dict.fromkeys(found))


# ---- numbers in files shapewise reads -------------------------------------------------------
LONGEST_NUMBER = 300  # digits: no number shapewise reads or writes has more (a float's range ends at 309)


def json_int(text: str) -> int:
    """json.loads's parse_int for the files users give (configs, profiles, exports): an integer, unless it is
    longer than any number shapewise reads or writes (past 4,300 digits Python refuses it with advice meant
    for programmers, and past 309 no float holds it)."""
    digits = len(text.lstrip("-"))
    if digits > LONGEST_NUMBER:
        raise ShapewiseError(f"a number in it is {digits:,} digits long, longer than any number shapewise reads "
                             f"or writes")
    return int(text)
