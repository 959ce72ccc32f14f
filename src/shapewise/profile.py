"""GPU profiles: what the cost model learned from measurements on one GPU and software stack.

A profile is a JSON file:

    {"format": "shapewise-profile", "version": 5,
     "gpu": "h200",                         # key in the GPU table
     "environment": {...},                  # where it was measured (device: "cpu" for the CPU's times; GPU
                                            # name), driver, torch, CUDA, cuBLAS, clocks, timestamp
     "created_utc": "...",
     "params": {...},                       # CostParams fields that differ from the spec model
     "fit": {...}}                          # how the calibration went: cases, errors before and after

`params` may hold every CostParams field, tables included (`gemm_trees`: what the calibration GEMMs
left over, as gradient-boosted trees, or in older profiles `gemm_residuals`, their measured residuals;
`cutlass_kernels`, `cutlass_choices` and `cutlass_chooser`: the CUTLASS
kernels cuBLAS ran for the misaligned ones, each with its fitted time model, which shape ran which,
and what that taught about which one cuBLAS picks). Predictions for a GPU use the user's profile for
it if there is one (`shapewise calibrate` writes it to profile_dir()), else the profile shipped in
the package, else the spec model; an H100 borrows the H200's profile (the same chip and clocks, less
bandwidth).

That choice is made once, at the public boundary, by cost_model(): it returns a CostModel (the GPU,
the parameters and where they came from) that every prediction below it is given, so that all of
them agree and every output can say which model it used.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import itertools
import json
import math
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

from . import trees
from .corrections import CHOOSER_FEATURES, CUTLASS_TERMS, KERNEL_COLUMNS, TREE_FEATURES
from .errors import ShapewiseError, argument, switched_on, warn
from .hardware import GPU, find_gpu, get_gpu
from .limits import flag, json_int
from .params import SPEC, CostParams, scalar_problem

FORMAT = "shapewise-profile"
# The tables' row widths (see CostParams): a row of another width is a corrupt or foreign file.
TABLE_WIDTHS = {"gemm_residuals": 8, "cutlass_kernels": KERNEL_COLUMNS + len(CUTLASS_TERMS), "cutlass_choices": 8,
                "cutlass_chooser": len(CHOOSER_FEATURES), "gemm_trees": trees.ROW_WIDTH}
# 2: fused attention by query blocks (flash_overhead_*, flash_latency_*), not s0; 3: a CUTLASS
# kernel's load term counts only the filled share of a partial tile (cost._cutlass_term_list); 4: which
# CUTLASS kernel cuBLAS runs is learned (cutlass_chooser), not taken from the nearest shapes; 5:
# decoding attention by the kernel's blocks and steps (flash_decode_*), not a walk per query head
VERSION = 5
# GPUs without a profile of their own that may use another's, marked as borrowed.
BORROW = {"h100": "h200", "h100-pcie": "h200", "h20": "h200"}


@dataclass(frozen=True)
class Profile:
    gpu: str
    params: CostParams = field(repr=False)  # its tables hold thousands of rows
    environment: dict = field(default_factory=dict)
    created_utc: str = ""
    fit: dict = field(default_factory=dict)
    path: str = ""  # where it was read from ("" when made in memory)
    borrowed_for: str = ""  # set when another GPU uses this profile

    def describe(self) -> str:
        env = self.environment
        what = f"calibrated profile of {env.get('gpu_name') or self.gpu}"
        if env.get("device") == "cpu":
            what = f"profile for {self.gpu} fitted on CPU times"
        if env.get("torch_version"):
            what += f", torch {env['torch_version']}"
        if self.created_utc:
            what += f", {self.created_utc[:10]}"
        if self.borrowed_for:
            what += (f" (borrowed for {self.borrowed_for}: `shapewise calibrate --quick` on it fits its own factors in"
                     " under a minute)")
        if self.fit.get("borrowed_from"):  # calibrate --quick on top of another GPU's profile
            what += f", with this {self.gpu}'s factors"
        return what


def _params_to_json(params: CostParams) -> dict:
    out = {f.name: getattr(params, f.name) for f in dataclasses.fields(CostParams)
           if getattr(params, f.name) != getattr(SPEC, f.name)}
    if "machine_gemm" in out:  # written beside it even at 1: a file without it is read as before it was fitted
        out["machine_stream"] = params.machine_stream
    return out


def _params_from_json(data: dict, where: str) -> CostParams:
    if not isinstance(data, dict):
        raise ShapewiseError(f"{where}: 'params' must be an object")
    known = {f.name: f for f in dataclasses.fields(CostParams)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ShapewiseError(f"{where}: unknown cost-model parameters {', '.join(unknown)}; "
                             f"was it written by a newer shapewise?")
    values = {}
    for name, value in data.items():
        default = getattr(SPEC, name)
        if isinstance(default, tuple):  # JSON lists back to the tuples CostParams holds
            if not isinstance(value, list):
                raise ShapewiseError(f"{where}: parameter {name} must be a list")
            value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
            width = TABLE_WIDTHS.get(name)
            if width and not _is_table(value, width):
                raise ShapewiseError(f"{where}: every row of {name} must be {width} finite numbers")
        elif isinstance(default, (int, float)) and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ShapewiseError(f"{where}: parameter {name} must be a number, got {str(value)[:40]}")
        elif isinstance(default, int) and not isinstance(value, int):
            raise ShapewiseError(f"{where}: parameter {name} must be a whole number, got {value!r}")
        elif isinstance(default, float):
            value = float(value)  # 2 for 2.0: numpy would hold a huge int as an object, not a float
        values[name] = value
    _check_numbers(values, where)
    tiles, rates = values.get("tiles", SPEC.tiles), values.get("tile_rates", SPEC.tile_rates)
    if not all(isinstance(t, tuple) and len(t) == 2 and all(isinstance(d, int) and d > 0 for d in t) for t in tiles):
        raise ShapewiseError(f"{where}: every tile must be two whole numbers over 0 (rows, columns)")
    if len(tiles) != len(rates):
        raise ShapewiseError(f"{where}: {len(tiles)} tiles but {len(rates)} tile_rates; each tile needs its rate: "
                             "the file is damaged")
    blocks = values.get("flash_blocks_bwd", ())
    buckets = values.get("flash_buckets", SPEC.flash_buckets)
    if blocks and (len(blocks) != len(buckets) or not all(isinstance(b, int) and b > 0 for b in blocks)):
        raise ShapewiseError(f"{where}: flash_blocks_bwd must be one whole number of rows over 0 per head-dim bucket "
                             f"({len(buckets)}): the file is damaged")
    octaves = values.get("residual_octaves", SPEC.residual_octaves)
    if not OCTAVES[0] <= octaves <= OCTAVES[1]:
        raise ShapewiseError(f"{where}: parameter residual_octaves is {octaves}; the width of a calibration shape's "
                             f"neighbourhood must be {OCTAVES[0]} to {OCTAVES[1]} octaves (calibrate picks 0.75 to "
                             f"1.5): calibrate again or use another profile")
    # Where a residual (or a kernel choice) was measured: a layout and two alignment classes (each 0, 1
    # or 2), then log2 of m, n, k and batch (a dim of 1 to 2^63).
    tables = {name: np.array(values.get(name, ()), dtype=float).reshape(-1, TABLE_WIDTHS[name])
              for name in ("gemm_residuals", "cutlass_choices")}
    for name, first in (("gemm_residuals", 3), ("cutlass_choices", 2)):
        place, log2_dims = tables[name][:, :first], tables[name][:, first:first + 4]
        if not (np.isin(place, (0, 1, 2)).all() and ((log2_dims >= 0) & (log2_dims <= 63)).all()):
            raise ShapewiseError(f"{where}: {name} hold a place outside the layouts, alignment classes or log2 "
                                 "dims 0 to 63: calibrate again or use another profile")
    kernels, named = len(values.get("cutlass_kernels", ())), tables["cutlass_choices"][:, 6]
    if not ((named >= 0) & (named < kernels) & (named == np.floor(named))).all():
        raise ShapewiseError(f"{where}: cutlass_choices name kernels that cutlass_kernels does not hold")
    forest = np.array(values.get("gemm_trees", ()), dtype=float).reshape(-1, trees.ROW_WIDTH)
    asked = forest[:, :trees.DEPTH]
    if not ((asked >= 0) & (asked < len(TREE_FEATURES)) & (asked == np.floor(asked))).all():
        raise ShapewiseError(f"{where}: gemm_trees ask of features that corrections.TREE_FEATURES does not hold")
    reach = abs(values.get("gemm_tree_base", 0.0)) + np.abs(forest[:, 2 * trees.DEPTH:]).max(axis=1, initial=0).sum()
    if reach > TREE_REACH:
        raise ShapewiseError(f"{where}: gemm_trees could scale a GEMM's time by e^{reach:.3g}, over the "
                             f"e^{TREE_REACH:.3g} (a millionfold) any measurement could: the file is damaged")
    if values.get("cutlass_chooser") and len(values["cutlass_chooser"]) != kernels:
        raise ShapewiseError(f"{where}: cutlass_chooser needs one row per row of cutlass_kernels")
    if "machine_gemm" in values and "machine_stream" not in values:
        # `calibrate --quick` before its stream family: its GEMMs' factor priced the few-row GEMMs too
        values["machine_stream"] = values["machine_gemm"]
    try:
        return dataclasses.replace(SPEC, **values)
    except ShapewiseError as err:  # a rate of 0 (CostParams' own check; written so before the floor), said of the file
        raise ShapewiseError(f"{where}: parameter {str(err).removeprefix('CostParams: ')}: calibrate again or use "
                             "another profile") from None


def read_params(data: dict, names, *, where: str) -> dict:
    """The parameters `names` of a profile's 'params' object `data` (others it holds are not read), each checked and
    read as a profile's are: one it leaves out is the spec model's (a file without machine_stream, machine_gemm's)."""
    names = [names] if isinstance(names, str) else list(names)  # one name, not its letters
    known = {f.name for f in dataclasses.fields(CostParams)}
    if unknown := [n for n in names if n not in known]:
        raise ShapewiseError(f"no cost-model parameter is named {', '.join(unknown)}")
    if not isinstance(data, dict):
        raise ShapewiseError(f"{where}: 'params' must be an object")
    params = _params_from_json({k: v for k, v in data.items() if k in names}, where)
    return {name: getattr(params, name) for name in names}


# The most the trees of a profile may scale a GEMM's time by, as a log: the base and every tree's largest
# leaf together (the shipped H200 profile's reach 9.7, its correction within a few tens of percent).
# Past it a damaged file would overflow the prediction instead of being refused.
TREE_REACH = math.log(1e6)
# The residual tables' kernel width (CostParams.residual_octaves) a profile may hold: far outside the
# widths calibrate tries (0.75 to 1.5 octaves), a width weighs every calibration shape alike or none,
# and its arithmetic overflows.
OCTAVES = (1 / 16, 16.0)
# A list parameter whose spec model holds none has no item to compare with: its declared type says
# what an item is (a family's name and a number, for the per-family tables).
NAMED_NUMBER = ("", 0.0)


def _item_template(name: str):
    """What an item of list parameter `name` must look like: the spec model's first, or by its type."""
    default = getattr(SPEC, name)
    if default:
        return default[0]
    kind = next(f.type for f in dataclasses.fields(CostParams) if f.name == name)
    return NAMED_NUMBER if str(kind).replace(" ", "") == "tuple[tuple[str,float],...]" else None


def _check_numbers(values: dict, where: str) -> None:
    """Every number finite; scalar parameters (times, rates, fractions) not negative (but SIGNED); a list's items
    of the same kind and length as the spec model's (a table's rows are checked by TABLE_WIDTHS)."""
    for name, value in values.items():
        default = getattr(SPEC, name)
        if name in TABLE_WIDTHS:
            continue  # its rows were checked whole (_is_table)
        if isinstance(default, tuple):
            template = _item_template(name)
            for item in value:
                if not _same_kind(item, template, table=name in TABLE_WIDTHS):
                    like = "a name and a number of 0 or more" if template == NAMED_NUMBER else f"the spec model's {template!r}"
                    raise ShapewiseError(f"{where}: parameter {name} holds {str(item)[:40]}, not an item like {like}: "
                                         f"the file is damaged or not shapewise's")
        elif problem := scalar_problem(name, value):
            raise ShapewiseError(f"{where}: parameter {problem}: calibrate again or use another profile")


def _is_table(rows: tuple, width: int) -> bool:
    """Every row `width` finite numbers (not booleans): one pass over a table of thousands of rows."""
    items = list(itertools.chain.from_iterable(rows)) if all(
        isinstance(row, tuple) and len(row) == width for row in rows) else None
    return items is not None and set(map(type, items)) <= {int, float} and all(map(math.isfinite, items))


def _same_kind(item, template, *, table: bool) -> bool:
    """An item of a list parameter, of the kind of the spec model's items (`template`; None where the
    spec model has none): a row of the same length, a name, or a finite number (0 or more outside
    the tables, whose coefficients and log residuals may be negative)."""
    if isinstance(item, tuple):
        if template is not None and (not isinstance(template, tuple) or len(item) != len(template)):
            return False
        templates = template if template is not None else (None,) * len(item)
        return all(_same_kind(x, t, table=table) for x, t in zip(item, templates))
    if template is not None and isinstance(template, tuple):
        return False
    if isinstance(item, str) or isinstance(template, str):
        return isinstance(item, str) and (template is None or isinstance(template, str))
    return isinstance(item, (int, float)) and not isinstance(item, bool) and math.isfinite(item) and (
        table or item >= 0)


def _check_predicts(params: CostParams, gpu: GPU, where: str) -> None:
    """The parameters must price a few ops to finite positive times: a last guard against a file whose
    every number is fine but whose tables do not fit together (or whose efficiencies are zero)."""
    import numpy as np

    from .cost import predict_attention, predict_gemm, predict_ops
    from .ops import attention_op

    model = CostModel(gpu, params, f"the profile {where}")
    m, n, k = np.meshgrid([64, 4096, 4097, 8192], [64, 4096, 4097, 8192], [4096, 4097], indexing="ij")
    # Decoding (narrow and wide heads, a shared key head) and sliding windows (each head-dim bucket).
    attention = [attention_op("fwd", seqs=1, heads=8, kv_heads=1, q_len=1, kv_len=4096, head_dim=d, causal=False,
                              dtype_bytes=2) for d in (128, 256)]
    attention += [attention_op(pass_, seqs=1, heads=8, kv_heads=8, q_len=4096, kv_len=4096, head_dim=d, causal=True,
                               dtype_bytes=2, window=1024, name="attn/window") for d in (64, 128, 256)
                  for pass_ in ("fwd", "bwd")]
    try:  # aligned and misaligned, small and large, and fused attention: each part of the model in use
        times = [*np.ravel(predict_gemm(m.ravel(), n.ravel(), k.ravel(), gpu=model, dtype="bf16").time_ms),
                 *(predict_attention(batch=1, heads=8, kv_heads=8, seq=1024, head_dim=d, causal=True, pass_=pass_,
                                     gpu=model, dtype="bf16") for d in (64, 128) for pass_ in ("fwd", "fwdbwd")),
                 *(cost.time_ms for cost in predict_ops(attention, gpu=model, dtype="bf16"))]
    except (ValueError, IndexError, ZeroDivisionError, FloatingPointError, OverflowError, TypeError) as err:
        raise ShapewiseError(f"{where}: its parameters do not fit together ({type(err).__name__}: "
                             f"{str(err)[:80]}); calibrate again or use another profile") from None
    if not all(math.isfinite(float(t)) and float(t) > 0 for t in times):
        raise ShapewiseError(f"{where}: its parameters price some ops at zero, negative or infinite times; "
                             f"calibrate again or use another profile")


def to_json(profile: Profile) -> dict:
    return {"format": FORMAT, "version": VERSION, "gpu": profile.gpu, "environment": profile.environment,
            "created_utc": profile.created_utc, "params": _params_to_json(profile.params), "fit": profile.fit}


def to_text(profile: Profile) -> str:
    """The profile as JSON laid out as json.dumps(indent=1) does, but a list of numbers alone on one
    line, so that a table is a row per line (a profile's tables hold thousands of rows)."""
    return _json_text(to_json(profile), 0) + "\n"


def _json_text(value, level: int) -> str:
    inner, outer = " " * (level + 1), " " * level
    if isinstance(value, dict) and value:
        return "{\n" + ",\n".join(f"{inner}{json.dumps(str(k) if not isinstance(k, str) else k)}: "
                                   f"{_json_text(v, level + 1)}" for k, v in value.items()) + f"\n{outer}}}"
    if isinstance(value, (list, tuple)) and value:
        if all(type(x) in (int, float) for x in value) and all(map(math.isfinite, value)):
            return "[" + ", ".join(map(repr, value)) + "]"  # repr: what json writes for a finite int or float
        return "[\n" + ",\n".join(inner + _json_text(v, level + 1) for v in value) + f"\n{outer}]"
    return json.dumps(value)


CPU_TIMES = "its times were measured on the CPU"


def _measured_where(profile: Profile, gpu: str) -> list[str]:
    """Every reason `profile`'s times are not GPU `gpu`'s, in the order measured_elsewhere tells them:
    CPU_TIMES for a CPU's (a run on the CPU takes them), the other GPU's name for another GPU's."""
    base, machine = profile.environment, profile.fit.get("machine", {}).get("environment", {})
    lender = (profile.gpu,) if profile.borrowed_for == gpu else ()
    reasons = []
    for env, allowed in ((base, (gpu, profile.fit.get("borrowed_from"), *lender)), (machine, (gpu, *lender))):
        name = env.get("gpu_name")
        if env.get("device") == "cpu":
            reasons.append(CPU_TIMES)
        elif name and getattr(find_gpu(name), "key", None) not in allowed:
            reasons.append(f"its times were measured on {name}, not on the {gpu}")
    return reasons


def measured_elsewhere(profile: Profile, gpu: str, *, device: str | None = None) -> str:
    """Why `profile`'s times are not GPU `gpu`'s ("" when they are): measured on the CPU, or on another GPU.
    A lent profile (lent()) may come from its lender, and a machine's refit (machine.machine_profile) from
    the GPU whose profile it borrowed; a profile that does not say (every one written before the device was
    recorded, all measured on GPUs) is taken as measured on the GPU it names. `device`: where a run judging
    the profile measures; "cpu" takes CPU times as `gpu`'s (what such a run, judged as the GPU's, measures)."""
    return next((r for r in _measured_where(profile, gpu) if not (r == CPU_TIMES and device == "cpu")), "")


def check_measured_on(profile: Profile, gpu: str, where: str, *, device: str | None = None) -> None:
    """Refuse a profile whose times are not GPU `gpu`'s: a CPU's or another GPU's times price no GPU.
    `device`: what a run judging the profile measures on (None: no run, a prediction). A run on the CPU,
    judged as `gpu`'s, is what a profile fitted on CPU times describes: accepted there; a GPU's run, never."""
    reasons = _measured_where(profile, gpu)
    refused = [r for r in reasons if not (r == CPU_TIMES and device == "cpu")]
    if not refused:
        return
    # CPU times alone: a run on the CPU takes them (a run already there was refused for another GPU's)
    on_cpu = f"judge it in a run on the CPU ({argument('device')} cpu), not on {device}, or " \
        if device is not None and set(reasons) == {CPU_TIMES} else ""
    raise ShapewiseError(f"{where}: {refused[0]}, so it prices no {gpu}: {on_cpu}run `shapewise calibrate` on the "
                         f"{gpu} itself for its profile")


def save(profile: Profile, path: str | os.PathLike) -> Path:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(to_text(profile))
    except OSError as err:
        raise ShapewiseError(f"cannot write the profile to {path}: {err.strerror or err}") from None
    return path


def load(path: str | os.PathLike) -> Profile:
    """Read a profile, rejecting anything that is not one (or is from a newer format) with a clear error."""
    where = str(path)
    try:
        if where.endswith(".gz"):  # a profile kept gzipped (the results' folders keep theirs so)
            with gzip.open(path, "rt", encoding="utf-8") as f:
                text = f.read()
        else:
            text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ShapewiseError(f"cannot read profile {where}: {err.strerror or err}") from None
    except (UnicodeDecodeError, EOFError):
        raise ShapewiseError(f"{where} is not a shapewise profile: not a text file (not UTF-8)") from None
    return from_text(text, where=where)


def from_text(text: str, *, where: str = "profile") -> Profile:
    try:
        data = json.loads(text, parse_int=json_int)
    except ShapewiseError as err:
        raise ShapewiseError(f"{where} is not a shapewise profile: {err}") from None
    except (ValueError, UnicodeDecodeError) as err:  # json.JSONDecodeError is a ValueError
        raise ShapewiseError(f"{where} is not a shapewise profile: not JSON ({err})") from None
    except RecursionError:
        raise ShapewiseError(f"{where} is not a shapewise profile: JSON nested too deeply") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ShapewiseError(f"{where} is not a shapewise profile (no \"format\": \"{FORMAT}\")")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int):  # `"version": true` is no version
        raise ShapewiseError(f"{where}: \"version\" must be a whole number (this shapewise reads {VERSION}), "
                             f"got {json.dumps(version)[:40]}")
    if 1 <= version < VERSION:
        raise OutdatedProfile(f"{where} is profile format version {version}, from an older cost model; this "
                             f"shapewise reads version {VERSION}: run `shapewise calibrate` again")
    if version != VERSION:
        raise ShapewiseError(f"{where} is profile format version {version!r}; this shapewise reads version "
                             f"{VERSION}: upgrade shapewise or calibrate again")
    gpu = data.get("gpu")
    if not isinstance(gpu, str):
        raise ShapewiseError(f"{where}: 'gpu' must name a GPU")
    measured_on = get_gpu(gpu)  # an unknown GPU is an error here too
    environment, fit = data.get("environment", {}), data.get("fit", {})
    if not isinstance(environment, dict) or not isinstance(fit, dict):
        raise ShapewiseError(f"{where}: 'environment' and 'fit' must be objects")
    machine = fit.get("machine", {})  # where a machine's refit measured (machine.machine_profile)
    if not isinstance(machine, dict) or not isinstance(machine.get("environment", {}), dict):
        raise ShapewiseError(f"{where}: 'fit' holds a 'machine' that is not an object with an 'environment' object")
    for env in (environment, machine.get("environment", {})):  # what measured_elsewhere reads
        if not all(isinstance(env.get(k), (str, type(None))) for k in ("device", "gpu_name")):
            raise ShapewiseError(f"{where}: an environment's device and gpu_name must be text")
    params = _params_from_json(data.get("params", {}), where)
    _check_predicts(params, measured_on, where)
    return Profile(gpu=gpu, params=params, environment=environment,
                   created_utc=str(data.get("created_utc", "")), fit=fit, path=where)


class OutdatedProfile(ShapewiseError):
    """A profile written for an older cost model: readable as JSON, but its parameters mean other things."""


def profile_dir() -> Path:
    """Where `shapewise calibrate` writes profiles: $SHAPEWISE_PROFILES, else the user's data folder."""
    if os.environ.get("SHAPEWISE_PROFILES"):
        return Path(os.environ["SHAPEWISE_PROFILES"])
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "shapewise" / "profiles"


@functools.lru_cache(maxsize=None)  # the package's own files do not change while it runs; reading one takes 0.3 s
def _shipped(key: str) -> Profile | None:
    resource = resources.files("shapewise") / "data" / "profiles" / f"{key}.json"
    if not resource.is_file():
        return None
    return dataclasses.replace(from_text(resource.read_text(), where=f"shipped profile {key}.json"),
                               path=f"shipped:{key}.json")


def find(gpu: GPU | str) -> Profile | None:
    """The profile predictions for this GPU should use: the user's, else the shipped one, else a
    borrowed one (marked), else None (the spec model). Read once per file version: a profile holds
    thousands of table rows, and reading one takes a third of a second."""
    gpu = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    keys = tuple(key for key in (gpu.key, BORROW.get(gpu.key)) if key)
    return _find(gpu.key, tuple(_stamp(profile_dir() / f"{key}.json") for key in keys))


def _stamp(path: Path) -> tuple:
    """What identifies a version of a user's profile file: its path, and its time and size if it exists."""
    try:
        stat = path.stat()
    except OSError:
        return (str(path),)
    return str(path), stat.st_mtime_ns, stat.st_size


@functools.lru_cache(maxsize=16)
def _find(key: str, stamps: tuple) -> Profile | None:
    for (own, borrowed), stamp in zip(((key, ""), (BORROW.get(key), key)), stamps):
        user = Path(stamp[0])
        try:
            profile = load(user) if len(stamp) > 1 and user.is_file() else _shipped(own)
        except OutdatedProfile as err:  # still a prediction, from the shipped profile, with the reason said
            profile = _shipped(own)
            warn(f"{err}; using the {'shipped profile' if profile else 'spec model'} until then")
        except ShapewiseError as err:  # a broken file in the folder: set aside once, said, and not used
            profile = _shipped(key)
            warn(f"{_set_aside(user)}: {' '.join(str(err).split())[:300]}; using the "
                 f"{'shipped profile' if profile else 'spec model'} for {key}")
        else:
            reason = measured_elsewhere(profile, own) if profile is not None and profile.path == str(user) else ""
            if reason:  # a CPU's or another GPU's times, written under this GPU's name: set aside as a broken one
                aside = _set_aside(user, f"is not the {own}'s profile ({reason}) and")
                warn(f"{aside}; predictions for {key} do not use it")
                profile = _shipped(own)
        if profile is not None:
            return lent(profile, borrowed) if borrowed else profile
    return None


def for_gpu(profile: Profile, gpu: str, *, borrow: bool = False, device: str | None = None,
            gpu_times: bool = False) -> Profile:
    """A given profile to price GPU `gpu` with (or be judged as its): itself where it is that GPU's; another
    GPU's only where borrowed (lent), else refused in one line. One fitted on CPU times is refused for them
    first (check_measured_on, `device` as there), not sent to a --gpu that would be refused in turn.
    gpu_times: it is to judge times measured on `gpu` itself, which another --gpu would not make its."""
    if profile.gpu == gpu:
        return profile
    where = profile.path or "the profile"
    if profile.environment.get("device") == "cpu":
        check_measured_on(profile, gpu, where, device=device)
    if not borrow:
        borrowing = switched_on("borrow_profile")
        if gpu_times:
            raise ShapewiseError(f"{where} is a profile of the {profile.gpu}, not of the {gpu} whose times it would "
                                 f"judge: {borrowing} to judge it as the {gpu}'s, or run `shapewise "
                                 f"calibrate` on the {gpu} for its own")
        raise ShapewiseError(f"{where} is a profile of the {profile.gpu}, not the {gpu}: give {argument('gpu')} "
                             f"{profile.gpu}, or {borrowing} to price {gpu} with it")
    return lent(profile, gpu)


def lent(profile: Profile, to: str) -> Profile:
    """A profile as another GPU borrows it: marked so, less its one-row walk (params.WALK_*), a choice of
    kernels that cuBLAS makes on the lending GPU alone (an H100 runs another kernel there)."""
    params = dataclasses.replace(profile.params, walk_fixed_ms=0.0, walk_per_k_ms=0.0)
    return dataclasses.replace(profile, params=params, borrowed_for=to)


def _set_aside(path: Path, reason: str = "is broken and") -> str:
    """Move a broken profile (or one whose times are not its GPU's) out of the way (PATH.broken), so
    that it is warned about once."""
    aside = path.with_name(path.name + ".broken")
    try:
        path.replace(aside)
    except OSError as err:
        return f"{path} {reason} could not be moved aside ({err.strerror or err})"
    return f"{path} {reason} was moved to {aside.name}"


SPEC_ASKED = "spec-only"  # the source of the spec model when asked for
SPEC_DEFAULT = "spec-only (no calibrated profile for this GPU)"


@dataclass(frozen=True, eq=False)
class CostModel:
    """The cost model one prediction uses: a GPU, the parameters (and tables) fitted for it, and where
    they came from. Made by cost_model() at the public boundary and passed down unchanged.

    CostModel(gpu, params) wraps parameters made in code (a fit, a test): its source then says so."""

    gpu: GPU
    params: CostParams = field(default=SPEC, repr=False)
    source: str = ""  # in words: "calibrated profile of NVIDIA H200, torch 2.11, 2026-12-01", "spec-only", …
    profile: Profile | None = field(default=None, repr=False)  # the profile the parameters come from, if any

    def __post_init__(self):
        if not isinstance(self.gpu, GPU):
            object.__setattr__(self, "gpu", get_gpu(self.gpu))
        if not isinstance(self.params, CostParams):  # a dict of a few parameters failed at the first op priced
            raise ShapewiseError(f"params must be a shapewise.CostParams (dataclasses.replace(CostParams(), NAME=VALUE) "
                                 f"for a few changed), got {self.params!r:.100}")
        if not self.source:
            object.__setattr__(self, "source", SPEC_ASKED if self.params is SPEC else "given parameters")

    def __repr__(self) -> str:
        return f"CostModel({self.gpu.key!r}, {self.source!r})"

    @property
    def calibrated(self) -> bool:
        return self.profile is not None

    def describe(self) -> str:
        return self.source

    def in_a_run(self) -> CostModel:
        """This model with no GEMM paying the power cap's onset within its own call (params.power_*),
        as if a step's GEMMs, run between memory-bound and attention ops, never reached it. Tried as
        the rankings' model: the variants runs of seeds 6-11 ranked better so, the blind seed 12 worse,
        so suggest, search and verify price the onset as check does (benchmarks/RESULTS.md, "the
        variants seed 12"). Kept for benchmarks/variants_repriced.py --power none."""
        if self.params.power_slowdown == 0:
            return self
        return dataclasses.replace(self, params=dataclasses.replace(self.params, power_slowdown=0.0))


def cost_model(gpu: GPU | str | CostModel, *, spec_only: bool = False,
               profile: Profile | str | os.PathLike | None = None, device: str | None = None,
               borrow_profile: bool = False) -> CostModel:
    """The cost model for a GPU: the spec model when asked (spec_only), else the given profile (a
    Profile or the path of one), else the GPU's calibrated profile (find: the user's, else the
    shipped one, else a borrowed one), else the spec model. A CostModel passes through unchanged.
    device: where a run judging a given profile measures (check_measured_on); None for a prediction.
    borrow_profile: a given profile of another GPU prices this one, and says so (the commands'
    --borrow-profile); without it such a profile is refused (for_gpu)."""
    spec_only, borrow_profile = flag(spec_only, "spec_only"), flag(borrow_profile, "borrow_profile")
    if borrow_profile and profile is None:
        raise ShapewiseError(f"{argument('borrow_profile')} lends the given profile to another GPU: "
                             + (f"{argument('spec_only')} uses no profile; leave it out" if spec_only else
                                f"give {argument('profile')} too, or leave {argument('borrow_profile')} out"))
    if device is not None and (not isinstance(device, str) or not device.strip()):
        raise ShapewiseError(f"device must name where a run measures ('cuda', 'cuda:1', 'cpu'), got {device!r}")
    if profile is not None and not isinstance(profile, Profile) and \
            (not isinstance(profile, (str, os.PathLike)) or not os.fspath(profile).strip()):
        raise ShapewiseError(f"profile must be a Profile or the path of a profile's JSON file, got {profile!r:.100}")
    if isinstance(gpu, CostModel):
        if not spec_only and profile is None:
            return gpu
        gpu = gpu.gpu
    gpu = gpu if isinstance(gpu, GPU) else get_gpu(gpu)
    if spec_only and profile is not None:
        raise ShapewiseError("spec_only and a profile both choose the cost model: give one of them")
    if spec_only:
        return CostModel(gpu, SPEC, SPEC_ASKED)
    chosen = profile if isinstance(profile, Profile) else load(profile) if profile is not None else find(gpu)
    if chosen is None:
        return CostModel(gpu, SPEC, SPEC_DEFAULT)
    if profile is not None:  # find() has set aside already what is not this GPU's
        if chosen.borrowed_for != gpu.key:  # another GPU's prices this one only when lent (as the commands lend it)
            chosen = for_gpu(chosen, gpu.key, borrow=borrow_profile, device=device)
        check_measured_on(chosen, gpu.key, chosen.path or "the profile", device=device)
    return CostModel(gpu, chosen.params, chosen.describe(), chosen)
