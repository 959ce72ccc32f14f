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


def torch_runs(dtype: str, layout: str, batch: int) -> bool:
    """Whether torch runs a GEMM of this dtype, layout and batch: an fp8 one only unbatched in the nt layout."""
    return dtype != "fp8" or (layout == "nt" and batch == 1)


def refuse_fp8_layout(layouts, batches, *, hint: str = "") -> None:
    """fp8 GEMMs run through torch._scaled_mm, which takes only unbatched GEMMs in the nt layout: bench measures no
    other, and the cost model prices no other (a time for one that never runs would be a guess)."""
    if not all(torch_runs("fp8", layout, b) for layout in layouts for b in batches):
        raise ShapewiseError("fp8 GEMMs run only unbatched in the nt layout (torch._scaled_mm needs a column-major "
                             f"second operand){hint}")
