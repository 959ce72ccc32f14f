"""GPU specifications: one table, every number beside its source."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from .errors import ShapewiseError


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

    def peak_tflops(self, dtype: str) -> float:
        if dtype not in self.tflops:
            raise ShapewiseError(
                f"{self.name} has no {dtype} support in its datasheet; use one of {', '.join(self.tflops)}")
        return self.tflops[dtype]

    @property
    def bytes_per_s(self) -> float:
        return self.mem_bandwidth_gbs * 1e9


H200 = "NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200), SXM column"
HOPPER_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), table 3: H100 SXM5"

GPUS: tuple[GPU, ...] = (
    GPU("h200", "NVIDIA H200 SXM 141GB", "NVIDIA", "hopper", num_sms=132, boost_clock_mhz=1980,
        tflops={"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4, "fp8": 1978.9},
        mem_bandwidth_gbs=4800, l2_mb=50, memory_gb=141, align_bytes=16,
        aliases=("h200 sxm", "nvidia h200", "gh200"),
        sources={"num_sms": HOPPER_WP + " (same GH100 die)", "boost_clock_mhz": HOPPER_WP,
                 "tflops": H200 + " (sparse figures halved)", "mem_bandwidth_gbs": H200,
                 "l2_mb": HOPPER_WP, "memory_gb": H200,
                 "align_bytes": "cuBLAS docs, 'Tensor Core usage': pointers and leading dims multiple of 16 bytes"}),
)


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.strip().lower())


def get_gpu(name: str) -> GPU:
    """Look a GPU up by key, alias or torch device name (case-insensitive, longest match first)."""
    query = _norm(name)
    names = sorted(((_norm(n), g) for g in GPUS for n in (g.key, g.name, *g.aliases)),
                   key=lambda item: -len(item[0]))
    for n, gpu in names:
        if query == n:
            return gpu
    for n, gpu in names:  # "NVIDIA H200 NVL" or "NVIDIA A100-SXM4-80GB": a known name inside it
        if re.search(rf"(^|\s){re.escape(n)}($|\s)", query):
            return gpu
    close = difflib.get_close_matches(query, [n for n, _ in names], n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise ShapewiseError(f"unknown GPU {name!r}{hint} (`shapewise gpus` lists them)")
