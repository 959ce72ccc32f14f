"""The number formats shapewise knows: each one's size in bytes and the torch dtype that holds it.

The one table of them: the cost model reads the sizes, the measurement modules the torch names.
"""

from __future__ import annotations

from .errors import ShapewiseError

# name -> (bytes per element, torch dtype). tf32 is fp32 in memory: only the tensor cores' mode differs.
DTYPES = {"fp32": (4, "float32"), "tf32": (4, "float32"), "bf16": (2, "bfloat16"), "fp16": (2, "float16"),
          "fp8": (1, "float8_e4m3fn")}
DTYPE_BYTES = {name: size for name, (size, _) in DTYPES.items()}


def torch_dtype(dtype):
    """The torch dtype of a name of DTYPES (a torch dtype or its name is taken as it is)."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    name = DTYPES[dtype][1] if dtype in DTYPES else dtype
    found = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(found, torch.dtype):
        raise ShapewiseError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    return found

# An fp8 step runs its GEMMs in fp8 but keeps what flows between them (the residual stream, norms,
# attention) and what the pipeline sends in bf16, as Transformer Engine does: 2 bytes at the least.
ACTIVATION_MIN_BYTES = 2


def activation_bytes(dtype_bytes):
    """Bytes of an activation element of a step in a dtype of dtype_bytes (ACTIVATION_MIN_BYTES at least)."""
    return max(dtype_bytes, ACTIVATION_MIN_BYTES)


def activation_dtype(dtype: str) -> str:
    """The dtype a step's attention and batched GEMMs run in: an fp8 step's in bf16 (torch's fp8 GEMM,
    _scaled_mm, takes no batch, and its fused attention no fp8), any other step's in its own."""
    return "bf16" if dtype == "fp8" else dtype
