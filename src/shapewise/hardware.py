"""GPU specifications: one table, every number beside its source."""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field, fields

from .errors import ShapewiseError, warn


class _ReadOnly(dict):
    """A dict that refuses changes: the table's GPUs are shared by every call, so `gpu.tflops["bf16"] = 1`
    on one would reprice every later prediction of that GPU."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("a GPU's datasheet numbers are read-only; dataclasses.replace(gpu, tflops={...}) makes another")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.items())))

    def __reduce__(self):  # pickle and deepcopy rebuild it whole, not item by item
        return type(self), (dict(self),)


@dataclass(frozen=True)
class GPU:
    """Datasheet numbers of one accelerator. Peaks are dense (no structured sparsity)."""

    key: str  # short canonical name used on the command line, e.g. "h200"
    name: str  # full name, e.g. "NVIDIA H200 SXM 141GB"
    vendor: str  # "NVIDIA" or "AMD"
    arch: str  # volta, ampere, ada, hopper, blackwell, cdna2, cdna3
    num_sms: int  # streaming multiprocessors (NVIDIA) or compute units (AMD)
    boost_clock_mhz: int
    tflops: dict[str, float]  # dense peak TFLOP/s per dtype: fp32, tf32, bf16, fp16, fp8 (absent: unsupported)
    mem_bandwidth_gbs: float  # GB/s, 1e9 bytes
    l2_mb: float
    memory_gb: float
    align_bytes: int  # operand alignment the tensor cores need for their fast kernels
    aliases: tuple[str, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)  # field name -> citation

    def __post_init__(self):
        for name in ("tflops", "sources"):
            object.__setattr__(self, name, _ReadOnly(getattr(self, name)))

    def peak_tflops(self, dtype: str) -> float:
        self.check_dtype(dtype)
        return self.tflops[dtype]

    def check_dtype(self, dtype: str, *, among=None) -> None:
        """A dtype this GPU's datasheet lacks, refused naming those it has (of `among`, where a command takes
        fewer: search's --dtype takes no fp32, which a V100's refusal named)."""
        if dtype not in self.tflops:
            have = [d for d in self.tflops if among is None or d in among]
            raise ShapewiseError(f"{self.name} has no {dtype} support in its datasheet; use "
                                 f"{'one of ' if len(have) > 1 else ''}{', '.join(have)}")

    def to_json(self) -> dict:
        """What `gpus --json` gives of it: every field, each number's source under sources."""
        return {"key": self.key, "name": self.name, "vendor": self.vendor, "arch": self.arch,
                **{name: dict(getattr(self, name)) if name == "tflops" else getattr(self, name)
                   for name in NUMERIC_FIELDS},
                "aliases": list(self.aliases), "sources": dict(self.sources)}

    @property
    def bytes_per_s(self) -> float:
        return self.mem_bandwidth_gbs * 1e9


# The numeric fields, each of which must carry a citation in GPU.sources.
NUMERIC_FIELDS = tuple(f.name for f in fields(GPU) if f.name not in ("key", "name", "vendor", "arch", "aliases",
                                                                       "sources"))

# --- Citations, shared so the table below stays readable. "Sparse halved": NVIDIA datasheets print
# tensor peaks with 2:4 sparsity (marked *); the dense peak, the one a GEMM can reach, is half.
CUBLAS_ALIGN = "cuBLAS docs, 'Tensor Core usage': pointers and leading dims multiple of 16 bytes"
ROCM_ALIGN = ("assumed equal to cuBLAS's 16 bytes: rocBLAS/hipBLASLt document no hard rule, but their MFMA "
              "kernels load operands 128 bits (16 bytes) at a time and fall back to slower paths otherwise")

V100_WP = "NVIDIA Tesla V100 GPU Architecture whitepaper (2017), table 1 'Comparison of NVIDIA Tesla GPUs', V100 SXM2"
V100_DS = "NVIDIA V100 datasheet (nvidia.com/en-us/data-center/v100), V100 SXM2 column; fp16 = tensor performance"
A100_WP = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), 'Comparison of NVIDIA Data Center GPUs' table"
A100_DS = "NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100), sparse figures halved"
H200_MEASURED = ("torch.cuda.get_device_properties().L2_cache_size on an H200 (62,914,560 bytes; "
                 "benchmarks/results/h200-probe-env.json); the whitepaper gives 50 MB for the H100 SXM5")
HOPPER_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), table 3: H100 SXM5"
HOPPER_WP_PCIE = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), table 3: H100 PCIe"
H100_DS = "NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100), sparse figures halved"
H200 = "NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200), SXM column"
# NVIDIA publishes no H20 datasheet on nvidia.com; these are the partner spec-sheet figures reported at its
# Nov 2023 reveal and repeated since. That sheet lists dense figures, so nothing is halved.
H20_SHEET = "NVIDIA H20 partner spec sheet as reported by SemiAnalysis/Wccftech (Nov 2023); dense figures"
H20_SMS = "Geekbench 6 listing of the H20 (78 SMs), reported by Wccftech (2024)"
ADA_WP = ("NVIDIA Ada GPU Architecture whitepaper (rev. 2023), appendix A, GeForce RTX 4090 column; "
          "fp16/bf16/fp8 are the 'with FP32 Accumulate' rows (GeForce runs them at half the FP16-accumulate "
          "rate, and FP32 accumulate is what cuBLAS uses)")
GA102_WP = ("NVIDIA Ampere GA102 GPU Architecture whitepaper (2020), appendix A, GeForce RTX 3090 column; "
            "fp16/bf16 are the 'with FP32 Accumulate' rows (half rate on GeForce)")
GA102_L2 = "NVIDIA Ampere GA102 whitepaper: 6144 KB L2 (512 KB per 32-bit memory controller, 12 of them)"
L40S_DS = "NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s), sparse figures halved"
L4_DS = "NVIDIA L4 datasheet (nvidia.com/en-us/data-center/l4), sparse figures halved"
A10G_TABLE = ("Baseten, 'NVIDIA A10 vs A10G for ML model inference' spec table (AWS publishes no A10G tensor "
              "figures); fp16/bf16 70 and tf32 35 are FP32-accumulate rates, as on GeForce")
A10G_TPU = "TechPowerUp GPU database, NVIDIA A10G (GA102, 80 SMs, 1710 MHz boost); no NVIDIA datasheet exists"
A10G_AWS = "AWS EC2 G5 instance page: A10G with 24 GB GDDR6, 600 GB/s"
# MI250X: one package holds two GCDs that software sees as two GPUs (torch lists two devices), so one entry is
# ONE GCD: every package figure below is halved.
MI250X_DS = "AMD Instinct MI250X datasheet (amd.com/en/products/accelerators/instinct/mi200/mi250x.html), package / 2"
MI300X_DS = "AMD Instinct MI300X datasheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html)"
ROCM_SPECS = "ROCm docs, 'AMD GPU specifications' table (rocm.docs.amd.com/en/latest/reference/gpu-specs.html)"
B200_HGX = ("NVIDIA HGX B200 spec table (nvidia.com/en-us/data-center/hgx), 8-GPU totals / 8, "
            "sparse figures halved")
B200_SMS = "Chips and Cheese, 'Nvidia's B200: Keeping the CUDA Juggernaut Rolling' (74 SMs per die, 148 in all)"


def _cite(default: str, **overrides: str) -> dict[str, str]:
    """Sources for every numeric field: `default` unless overridden; alignment cites cuBLAS unless overridden."""
    unknown = set(overrides) - set(NUMERIC_FIELDS)
    if unknown:  # a typo here would silently leave a field citing the wrong source
        raise ValueError(f"_cite: not numeric fields: {sorted(unknown)}")
    return {name: default for name in NUMERIC_FIELDS} | {"align_bytes": CUBLAS_ALIGN} | overrides


GPUS: tuple[GPU, ...] = (
    GPU("v100", "NVIDIA Tesla V100 SXM2 32GB", "NVIDIA", "volta", num_sms=80, boost_clock_mhz=1530,
        tflops={"fp32": 15.7, "fp16": 125.0},  # Volta tensor cores: fp16 only, no bf16/tf32/fp8
        mem_bandwidth_gbs=900, l2_mb=6, memory_gb=32, align_bytes=16,
        aliases=("v100 sxm2", "v100 32gb", "v100 sxm2 32gb"),
        sources=_cite(V100_WP, tflops=V100_DS, mem_bandwidth_gbs=V100_DS, memory_gb=V100_DS)),
    GPU("a100-40gb", "NVIDIA A100 SXM4 40GB", "NVIDIA", "ampere", num_sms=108, boost_clock_mhz=1410,
        tflops={"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
        mem_bandwidth_gbs=1555, l2_mb=40, memory_gb=40, align_bytes=16,
        aliases=("a100 40gb", "a100 sxm 40gb", "a100 sxm4 40gb"),
        sources=_cite(A100_WP, tflops=A100_DS + ", A100 40GB SXM column",
                      mem_bandwidth_gbs=A100_DS + ", A100 40GB SXM column", memory_gb=A100_DS)),
    # "a100" alone means this one, the later and larger SXM part (AWS p4de, GCP a2-ultragpu, Azure NDm A100 v4);
    # the 40GB one (p4d, a2-highgpu, ND A100 v4) must be asked for by name: the compute is the same, memory is not.
    GPU("a100-80gb", "NVIDIA A100 SXM4 80GB", "NVIDIA", "ampere", num_sms=108, boost_clock_mhz=1410,
        tflops={"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
        mem_bandwidth_gbs=2039, l2_mb=40, memory_gb=80, align_bytes=16,
        aliases=("a100", "a100 sxm", "a100 sxm4", "a100 sxm 80gb", "a100 sxm4 80gb"),
        sources=_cite(A100_WP, tflops=A100_DS + ", A100 80GB SXM column",
                      mem_bandwidth_gbs=A100_DS + ", A100 80GB SXM column", memory_gb=A100_DS)),
    GPU("a100-40gb-pcie", "NVIDIA A100 PCIe 40GB", "NVIDIA", "ampere", num_sms=108, boost_clock_mhz=1410,
        tflops={"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
        mem_bandwidth_gbs=1555, l2_mb=40, memory_gb=40, align_bytes=16,
        aliases=("a100 pcie 40gb",),
        sources=_cite(A100_WP, tflops=A100_DS + ", A100 40GB PCIe column",
                      mem_bandwidth_gbs=A100_DS + ", A100 40GB PCIe column", memory_gb=A100_DS)),
    # "a100 pcie" alone means the 80GB card, for the same reason "a100" means the 80GB SXM.
    GPU("a100-80gb-pcie", "NVIDIA A100 PCIe 80GB", "NVIDIA", "ampere", num_sms=108, boost_clock_mhz=1410,
        tflops={"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
        mem_bandwidth_gbs=1935, l2_mb=40, memory_gb=80, align_bytes=16,
        aliases=("a100 pcie", "a100 80gb pcie"),
        sources=_cite(A100_WP, tflops=A100_DS + ", A100 80GB PCIe column",
                      mem_bandwidth_gbs=A100_DS + ", A100 80GB PCIe column", memory_gb=A100_DS)),
    # Boost clocks of Hopper are the fp32 ones; tensor peaks are quoted at a lower clock (1830 MHz on SXM).
    GPU("h100", "NVIDIA H100 SXM5 80GB", "NVIDIA", "hopper", num_sms=132, boost_clock_mhz=1980,
        tflops={"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        mem_bandwidth_gbs=3350, l2_mb=50, memory_gb=80, align_bytes=16,
        aliases=("h100 sxm", "h100 sxm5", "h100 80gb hbm3"),
        sources=_cite(HOPPER_WP, tflops=H100_DS + ", SXM column", mem_bandwidth_gbs=H100_DS + ", SXM column",
                      memory_gb=H100_DS)),
    GPU("h100-pcie", "NVIDIA H100 PCIe 80GB", "NVIDIA", "hopper", num_sms=114, boost_clock_mhz=1755,
        tflops={"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0, "fp8": 1513.0},
        mem_bandwidth_gbs=2000, l2_mb=50, memory_gb=80, align_bytes=16,
        aliases=("h100 pcie 80gb",),
        sources=_cite(HOPPER_WP_PCIE, tflops=HOPPER_WP_PCIE + " (dense columns; the datasheet's PCIe sparse "
                      "figures halved agree)", mem_bandwidth_gbs=H100_DS + ", PCIe column", memory_gb=H100_DS)),
    GPU("h200", "NVIDIA H200 SXM 141GB", "NVIDIA", "hopper", num_sms=132, boost_clock_mhz=1980,
        tflops={"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        mem_bandwidth_gbs=4800, l2_mb=60, memory_gb=141, align_bytes=16,
        # Not GH200: its GPU is this die, but its 96 GB HBM3 version has 4.0 TB/s, not 4.8 (unknown, not guessed).
        aliases=("h200 sxm",),
        sources=_cite(HOPPER_WP + " (same GH100 die)", boost_clock_mhz=HOPPER_WP,
                      tflops=H200 + " (sparse figures halved)", mem_bandwidth_gbs=H200, l2_mb=H200_MEASURED,
                      memory_gb=H200)),
    # H20: the export-limited Hopper. Its leaked numbers do not reconcile (44 TFLOPS fp32 on 78 SMs needs
    # 2.2 GHz, beyond any Hopper clock); treat fp32, num_sms and the clock as doubtful.
    GPU("h20", "NVIDIA H20 96GB", "NVIDIA", "hopper", num_sms=78, boost_clock_mhz=1980,
        tflops={"fp32": 44.0, "tf32": 74.0, "bf16": 148.0, "fp16": 148.0, "fp8": 296.0},
        mem_bandwidth_gbs=4000, l2_mb=60, memory_gb=96, align_bytes=16,
        aliases=("h20 96gb",),
        sources=_cite(H20_SHEET, num_sms=H20_SMS,
                      boost_clock_mhz="not published; ASSUMED the H100 SXM boost (1980 MHz, " + HOPPER_WP + ")")),
    GPU("l40s", "NVIDIA L40S 48GB", "NVIDIA", "ada", num_sms=142, boost_clock_mhz=2520,
        tflops={"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05, "fp8": 733.0},
        mem_bandwidth_gbs=864, l2_mb=96, memory_gb=48, align_bytes=16,
        aliases=("l40s 48gb",),
        sources=_cite(L40S_DS, num_sms=L40S_DS + " (18,176 CUDA cores / 128 per SM)",
                      boost_clock_mhz="TechPowerUp GPU database, NVIDIA L40S (2520 MHz boost); fp32 91.6 TFLOPS "
                      "= 142 SMs x 256 FLOP x 2.52 GHz agrees",
                      l2_mb="not on the datasheet; 96 MB is the full AD102 L2 (Ada whitepaper), which a 142-SM "
                      "part with all 12 memory controllers keeps (TechPowerUp's 48 MB looks like a placeholder)")),
    GPU("l4", "NVIDIA L4 24GB", "NVIDIA", "ada", num_sms=58, boost_clock_mhz=2040,
        tflops={"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5},
        mem_bandwidth_gbs=300, l2_mb=48, memory_gb=24, align_bytes=16,
        aliases=("l4 24gb",),
        sources=_cite(L4_DS, num_sms=L4_DS + " (7,424 CUDA cores / 128 per SM)",
                      boost_clock_mhz=L4_DS + " (max boost 2040 MHz)",
                      l2_mb="Ada whitepaper: AD104 has 48 MB L2 (TechPowerUp lists the same for L4)")),
    GPU("a10g", "NVIDIA A10G 24GB", "NVIDIA", "ampere", num_sms=80, boost_clock_mhz=1710,
        tflops={"fp32": 35.0, "tf32": 35.0, "bf16": 70.0, "fp16": 70.0},
        mem_bandwidth_gbs=600, l2_mb=6, memory_gb=24, align_bytes=16,
        aliases=("a10g 24gb",),
        sources=_cite(A10G_TABLE, num_sms=A10G_TPU, boost_clock_mhz=A10G_TPU, mem_bandwidth_gbs=A10G_AWS,
                      memory_gb=A10G_AWS, l2_mb=GA102_L2)),
    GPU("rtx4090", "NVIDIA GeForce RTX 4090", "NVIDIA", "ada", num_sms=128, boost_clock_mhz=2520,
        tflops={"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3},
        mem_bandwidth_gbs=1008, l2_mb=72, memory_gb=24, align_bytes=16,
        aliases=("4090", "rtx 4090"),
        sources=_cite(ADA_WP)),
    GPU("rtx3090", "NVIDIA GeForce RTX 3090", "NVIDIA", "ampere", num_sms=82, boost_clock_mhz=1695,
        tflops={"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0},
        mem_bandwidth_gbs=936, l2_mb=6, memory_gb=24, align_bytes=16,
        aliases=("3090", "rtx 3090"),
        sources=_cite(GA102_WP, l2_mb=GA102_L2)),
    # ONE GCD of the MI250X: half the package's CUs, peaks, memory, bandwidth and L2 (see MI250X_DS).
    GPU("mi250x", "AMD Instinct MI250X (one GCD)", "AMD", "cdna2", num_sms=110, boost_clock_mhz=1700,
        # fp32 is the vector (non-matrix) rate; CDNA2 has no tf32 or fp8
        tflops={"fp32": 23.95, "bf16": 191.5, "fp16": 191.5},
        mem_bandwidth_gbs=1638.4, l2_mb=8, memory_gb=64, align_bytes=16,
        aliases=("mi250x gcd", "mi250x one gcd"),
        sources=_cite(MI250X_DS, num_sms=ROCM_SPECS + " (220 CUs, 110 per GCD)",
                      mem_bandwidth_gbs=MI250X_DS + " (3.2 TB/s = 8 HBM2e stacks x 409.6 GB/s; 4 stacks per GCD)",
                      l2_mb=ROCM_SPECS + " (16 MB, 8 per GCD)", align_bytes=ROCM_ALIGN)),
    GPU("mi300x", "AMD Instinct MI300X 192GB", "AMD", "cdna3", num_sms=304, boost_clock_mhz=2100,
        # fp32 163.4 is AMD's 'FP32 vector' figure, which counts packed FP32 (2 per lane per clock)
        tflops={"fp32": 163.4, "tf32": 653.7, "bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9},
        mem_bandwidth_gbs=5300, l2_mb=32, memory_gb=192, align_bytes=16,
        aliases=("mi300x 192gb",),
        # L2 is 4 MB per XCD x 8 = 32 MB, not the 256 MB Infinity Cache: the L2 is the level GEMM tiles are
        # re-read from, while the Infinity Cache is a memory-side cache whose bandwidth sits between L2 and HBM.
        sources=_cite(MI300X_DS, num_sms=ROCM_SPECS + " (304 CUs, 38 per XCD)",
                      l2_mb=ROCM_SPECS + " (L2 32 MB = 4 MB per XCD x 8; the 256 MB Infinity Cache, listed "
                      "there as L3, is deliberately not counted)", align_bytes=ROCM_ALIGN)),
    GPU("b200", "NVIDIA B200 SXM 180GB", "NVIDIA", "blackwell", num_sms=148, boost_clock_mhz=1980,
        tflops={"fp32": 75.0, "tf32": 1125.0, "bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0},
        mem_bandwidth_gbs=8000, l2_mb=126, memory_gb=180, align_bytes=16,
        aliases=("b200 sxm", "hgx b200"),
        sources=_cite(B200_HGX, num_sms=B200_SMS,
                      boost_clock_mhz="not published; derived: fp32 75 TFLOPS / (148 SMs x 256 FLOP per clock) "
                      "= 1980 MHz",
                      mem_bandwidth_gbs="NVIDIA B200 launch (GTC 2024) and DGX B200 datasheet: 8 TB/s per GPU "
                      "(64 TB/s per 8); later HGX tables say 62 TB/s, i.e. 7.7 TB/s",
                      l2_mb="not in NVIDIA's tables; 126 MB as CUDA's device query reports it (secondary "
                      "sources, e.g. freeCodeCamp 'Evolution of NVIDIA Blackwell GPU memory architecture')",
                      memory_gb=B200_HGX + " (1.44 TB / 8 = 180 GB usable of the 192 GB stacked)")),
)

# Words that carry no identity: vendor and product-line prefixes torch and marketing put in front of names.
# Dropping them keeps "NVIDIA H100 PCIe" from matching a longer vendor-prefixed alias of the SXM part.
_NOISE_WORDS = frozenset({"nvidia", "amd", "tesla", "geforce", "instinct", "radeon"})


def _norm(text: str) -> str:
    """Lowercase, punctuation to spaces, vendor words dropped: 'NVIDIA A100-SXM4-80GB' -> 'a100 sxm4 80gb'."""
    words = re.split(r"[^a-z0-9]+", text.lower())
    return " ".join(w for w in words if w and w not in _NOISE_WORDS)


def _known_names() -> list[tuple[str, GPU]]:
    """Every normalized key, name and alias with its GPU, longest first so "h100 pcie" beats "h100"."""
    names = {(_norm(n), g.key): g for g in GPUS for n in (g.key, g.name, *g.aliases)}  # dedupe per GPU
    return sorted(((n, g) for (n, _), g in names.items() if n), key=lambda item: -len(item[0]))


@functools.lru_cache(maxsize=64)  # a store or an export names a handful of GPUs over thousands of rows
def find_gpu(name: str | None) -> GPU | None:
    """The GPU a measured device's name is (get_gpu's match), or None for a CPU, no name or a GPU the
    table does not know."""
    try:
        return get_gpu(name) if name else None
    except ShapewiseError:
        return None


# Words that name another product of a family whose base name shapewise knows (H100 NVL, RTX 4090 D):
# read as the base GPU, and said.
VARIANT_WORDS = frozenset({"nvl", "d", "ti", "super", "laptop", "mobile", "max", "q"})
# Names that fit several products the table holds apart: read as the first, and said with the others.
AMBIGUOUS = {"a100": ("a100-40gb", "a100-40gb-pcie", "a100-80gb-pcie"),
             "a100 sxm": ("a100-40gb",), "a100 sxm4": ("a100-40gb",), "a100 pcie": ("a100-40gb-pcie",)}
_SAID_NEAREST: set = set()


def _say_once(query: str, text: str) -> None:
    if query not in _SAID_NEAREST:
        _SAID_NEAREST.add(query)
        warn(text)


def get_gpu(name: str | GPU) -> GPU:
    """Look a GPU up by key, alias or torch device name (case-insensitive, longest match first). A
    name that holds a known one and more ("Tesla V100-PCIE-16GB") is read as the known GPU and said;
    one that names two ("h100 h200") is refused. A GPU is itself, as every function taking gpu= takes one."""
    if isinstance(name, GPU):
        return name
    if not isinstance(name, str):
        raise ShapewiseError(f"GPU name must be text, got {name!r}")
    query = _norm(name)
    names = _known_names()
    for n, gpu in names:
        if query == n:
            if n in AMBIGUOUS:
                _say_once(query, f"GPU {name!r} is read as {gpu.key} ({gpu.name}); it also names "
                                 f"{', '.join(AMBIGUOUS[n])}: give the key of the one you mean (`shapewise gpus`)")
            return gpu
    padded = f" {query} "
    inside = [(n, gpu) for n, gpu in names if f" {n} " in padded]  # whole words, longest first
    if inside:
        n, gpu = inside[0]
        others = sorted({g.key for m, g in inside if g.key != gpu.key and not set(m.split()) <= set(n.split())})
        if others:
            raise ShapewiseError(f"GPU {name!r} names more than one GPU ({gpu.key}, {', '.join(others)}): give one")
        own = {w for known in (gpu.key, gpu.name, *gpu.aliases) for w in _norm(known).split()}
        extra = [w for w in query.split() if w not in own]
        variant = sorted(set(extra) & VARIANT_WORDS)
        if variant:  # another product of the family: its numbers differ
            _say_once(query, f"GPU {name!r} is read as {gpu.key} ({gpu.name}), the nearest shapewise knows: its "
                             f"{' '.join(variant)} variant's clocks, memory and links may differ from these datasheet numbers")
        elif extra:
            _say_once(query, f"GPU {name!r} is read as {gpu.key} ({gpu.name}), the nearest shapewise knows: "
                             f"{' '.join(extra)!r} is not in its name, and another product's memory, clocks or links "
                             "would differ from these datasheet numbers")
        return gpu
    # Hint with keys, not normalized aliases: several aliases of one GPU collapse to one suggestion.
    by_name = dict(names)
    close = difflib.get_close_matches(query, list(by_name), n=8, cutoff=0.5)  # best first
    keys = list(dict.fromkeys(by_name[n].key for n in close))[:3]
    hint = f"; did you mean {', '.join(keys)}?" if keys else ""
    raise ShapewiseError(f"unknown GPU {name!r}{hint} (`shapewise gpus` lists them)")


# GPU-to-GPU links, per direction per GPU (what a ring collective's bus bandwidth approaches): the
# tensor-parallel collectives of the cost model travel over these. Datasheets give bidirectional
# totals; they are halved here. GPUs without a row get no communication model.
NVLINK_DATASHEETS = {
    "v100": ("NVLink 2", 150, "NVIDIA V100 datasheet: NVLink 300 GB/s (bidirectional), halved"),
    "a100-40gb": ("NVLink 3", 300, "NVIDIA A100 datasheet: NVLink 600 GB/s (bidirectional), halved"),
    "a100-80gb": ("NVLink 3", 300, "NVIDIA A100 datasheet: NVLink 600 GB/s (bidirectional), halved"),
    "a100-40gb-pcie": ("PCIe 4.0 x16", 32, "NVIDIA A100 datasheet: PCIe Gen4 64 GB/s (bidirectional), halved"),
    "a100-80gb-pcie": ("PCIe 4.0 x16", 32, "NVIDIA A100 datasheet: PCIe Gen4 64 GB/s (bidirectional), halved"),
    "h100": ("NVLink 4", 450, "NVIDIA H100 datasheet: NVLink 900 GB/s (bidirectional), halved"),
    "h100-pcie": ("PCIe 5.0 x16", 64, "NVIDIA H100 datasheet: PCIe Gen5 128 GB/s (bidirectional), halved"),
    "h200": ("NVLink 4", 450, "NVIDIA H200 datasheet: NVLink 900 GB/s (bidirectional), halved"),
    "h20": ("NVLink 4", 450, "NVIDIA H20 partner spec sheet: NVLink 900 GB/s (bidirectional), halved"),
    "l40s": ("PCIe 4.0 x16", 32, "NVIDIA L40S datasheet: PCIe Gen4 x16 64 GB/s (bidirectional), halved"),
    "l4": ("PCIe 4.0 x16", 32, "NVIDIA L4 datasheet: PCIe Gen4 x16 64 GB/s (bidirectional), halved"),
    "a10g": ("PCIe 4.0 x16", 32, "PCIe Gen4 x16: 64 GB/s (bidirectional), halved"),
    "rtx4090": ("PCIe 4.0 x16", 32, "PCIe Gen4 x16: 64 GB/s (bidirectional), halved; no peer-to-peer"),
    "rtx3090": ("PCIe 4.0 x16", 32, "PCIe Gen4 x16: 64 GB/s (bidirectional), halved"),
    "mi300x": ("Infinity Fabric", 448, "AMD Instinct MI300X datasheet: 7 links × 128 GB/s = 896 GB/s, halved"),
    "b200": ("NVLink 5", 900, "NVIDIA DGX B200 / HGX B200 datasheet: NVLink 1.8 TB/s (bidirectional), halved"),
}


def link(gpu: GPU) -> tuple[str, float] | None:
    """(name, GB/s per direction) of the GPU's link to its peers, or None where the table has none."""
    row = NVLINK_DATASHEETS.get(gpu.key)
    return (row[0], float(row[1])) if row else None
