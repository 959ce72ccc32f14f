"""The GPU table: complete, cited, self-consistent, and findable by every name torch prints."""

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shapewise.errors import ShapewiseError
from shapewise.hardware import GPU, GPUS, NUMERIC_FIELDS, _norm, get_gpu

ARCHS = {"volta", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3"}
DTYPES = {"fp32", "tf32", "bf16", "fp16", "fp8"}
EXPECTED_KEYS = {"v100", "a100-40gb", "a100-80gb", "a100-40gb-pcie", "a100-80gb-pcie", "h100", "h100-pcie",
                 "h200", "h20", "l40s", "l4", "a10g", "rtx4090", "rtx3090", "mi250x", "mi300x", "b200"}

# What torch.cuda.get_device_name prints on each card, and the entry it must resolve to.
TORCH_NAMES = {
    "NVIDIA H200": "h200",
    "NVIDIA H100 80GB HBM3": "h100",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA A100-SXM4-80GB": "a100-80gb",
    "NVIDIA A100-SXM4-40GB": "a100-40gb",
    "NVIDIA A100-PCIE-40GB": "a100-40gb-pcie",
    "NVIDIA A100 80GB PCIe": "a100-80gb-pcie",
    "NVIDIA L40S": "l40s",
    "NVIDIA L4": "l4",
    "NVIDIA A10G": "a10g",
    "NVIDIA GeForce RTX 4090": "rtx4090",
    "NVIDIA GeForce RTX 3090": "rtx3090",
    "Tesla V100-SXM2-32GB": "v100",
    "AMD Instinct MI300X": "mi300x",
    "AMD Instinct MI250X": "mi250x",
    "NVIDIA B200": "b200",
    "NVIDIA H20": "h20",
}

COMMON_SPELLINGS = {
    "a100": "a100-80gb",  # documented choice: plain "a100" is the 80GB SXM
    "A100 40GB": "a100-40gb",
    "a100-pcie": "a100-80gb-pcie",
    "A100 PCIe 40GB": "a100-40gb-pcie",
    "a100_40gb_pcie": "a100-40gb-pcie",
    "h100": "h100",
    "H100 SXM": "h100",
    "h100 pcie": "h100-pcie",
    "4090": "rtx4090",
    "rtx 4090": "rtx4090",
    "RTX4090": "rtx4090",
    "GeForce RTX 3090": "rtx3090",
    "mi300x": "mi300x",
    "mi250x": "mi250x",
    "AMD Instinct MI250X/MI250": "mi250x",  # ROCm's name for an MI250X GCD
    "v100": "v100",
    "  H200  ": "h200",
    "NVIDIA H200 NVL": "h200",  # a known name inside an unknown one
}


def by_key(key: str) -> GPU:
    return next(g for g in GPUS if g.key == key)


def test_table_has_every_expected_gpu_once():
    keys = [g.key for g in GPUS]
    assert len(keys) == len(set(keys))
    assert EXPECTED_KEYS <= set(keys)


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.key)
def test_fields_present_and_sane(gpu):
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", gpu.key)
    assert gpu.name and gpu.vendor in {"NVIDIA", "AMD"} and gpu.arch in ARCHS
    assert gpu.vendor == ("AMD" if gpu.arch.startswith("cdna") else "NVIDIA")
    assert isinstance(gpu.num_sms, int) and gpu.num_sms > 0
    assert isinstance(gpu.boost_clock_mhz, int) and 500 < gpu.boost_clock_mhz < 4000
    assert gpu.tflops and set(gpu.tflops) <= DTYPES and "fp32" in gpu.tflops and "fp16" in gpu.tflops
    assert all(v > 0 for v in gpu.tflops.values())
    assert gpu.mem_bandwidth_gbs > 0 and gpu.l2_mb > 0 and gpu.memory_gb > 0
    assert gpu.align_bytes == 16
    assert gpu.bytes_per_s == gpu.mem_bandwidth_gbs * 1e9


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.key)
def test_every_numeric_field_has_a_source(gpu):
    numeric = {f.name for f in dataclasses.fields(GPU)
               if isinstance(getattr(gpu, f.name), (int, float, dict)) and f.name != "sources"}
    assert numeric == set(NUMERIC_FIELDS)
    for name in numeric:
        assert len(gpu.sources.get(name, "").strip()) > 10, f"{gpu.key}.{name} has no source"


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.key)
def test_peaks_ordered(gpu):
    t = gpu.tflops
    # tf32 >= fp32, not >: GeForce cards and the A10G run TF32 tensor math at the FP32 CUDA-core rate.
    if "tf32" in t:
        assert t["tf32"] >= t["fp32"]
        assert t["bf16"] >= t["tf32"]
    if "bf16" in t:
        assert t["bf16"] > t["fp32"]
        assert t["bf16"] == t["fp16"]  # every tensor/matrix core in the table runs both at one rate
    if "fp8" in t:
        assert t["fp8"] > t["bf16"]


@pytest.mark.parametrize("key, missing", [
    ("v100", {"bf16", "tf32", "fp8"}), ("a100-80gb", {"fp8"}), ("a100-40gb-pcie", {"fp8"}), ("a10g", {"fp8"}),
    ("rtx3090", {"fp8"}), ("mi250x", {"tf32", "fp8"})])
def test_unsupported_dtypes_absent(key, missing):
    assert not missing & set(by_key(key).tflops)


@pytest.mark.parametrize("gpu", [g for g in GPUS if g.key != "h20"], ids=lambda g: g.key)
def test_fp32_peak_matches_units_times_clock(gpu):
    """Catches typos in num_sms or the clock: fp32 = units x (128 or 256 FLOP per clock) x clock.

    H20 is exempt: its reported 44 TFLOPS on 78 SMs would need a 2.2 GHz clock (see its sources)."""
    flop_per_clock = gpu.tflops["fp32"] * 1e12 / (gpu.num_sms * gpu.boost_clock_mhz * 1e6)
    assert min(abs(flop_per_clock - 128), abs(flop_per_clock - 256)) / flop_per_clock < 0.02


def test_mi250x_is_one_gcd():
    gcd = by_key("mi250x")
    assert "GCD" in gcd.name and "/ 2" in gcd.sources["tflops"]
    assert (gcd.num_sms, gcd.memory_gb, gcd.tflops["fp16"]) == (110, 64, 191.5)


def test_keys_names_and_aliases_are_unambiguous():
    owner = {}
    for gpu in GPUS:
        for n in (gpu.key, gpu.name, *gpu.aliases):
            assert _norm(n), f"{gpu.key}: {n!r} normalizes to nothing"
            assert owner.setdefault(_norm(n), gpu.key) == gpu.key, f"{n!r} names two GPUs"


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.key)
def test_every_name_resolves_to_its_gpu(gpu):
    for n in (gpu.key, gpu.name, *gpu.aliases, gpu.key.upper(), gpu.name.lower()):
        assert get_gpu(n) is gpu, n


@pytest.mark.parametrize("torch_name, key", TORCH_NAMES.items())
def test_torch_device_names(torch_name, key):
    assert get_gpu(torch_name).key == key


@pytest.mark.parametrize("text, key", COMMON_SPELLINGS.items())
def test_common_spellings(text, key):
    assert get_gpu(text).key == key


@pytest.mark.parametrize("text, key", [
    ("NVIDIA H100 PCIe", "h100-pcie"),  # "h100" is inside it too
    ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),  # so are "a100" and "a100 80gb"
    ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),  # and "a100 pcie"
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),  # and "a100 sxm4"
    ("NVIDIA H20", "h20"),  # a prefix of "h200" but not the same word
])
def test_longest_match_wins(text, key):
    assert get_gpu(text).key == key


@pytest.mark.parametrize("text, hint", [("h2000", "h200"), ("a1000", "a100"), ("mi300", "mi300x"),
                                         ("L40", "l40s")])
def test_unknown_name_raises_with_hint(text, hint):
    with pytest.raises(ShapewiseError, match="unknown GPU") as err:
        get_gpu(text)
    suggestions = str(err.value).split("did you mean", 1)[1]  # look past the echoed input
    assert hint in suggestions


@pytest.mark.parametrize("text", ["", "   ", "nvidia", "T4", "-_-"])
def test_unknown_without_close_match_still_raises(text):
    with pytest.raises(ShapewiseError, match="unknown GPU"):
        get_gpu(text)


def test_non_text_raises_shapewise_error():
    with pytest.raises(ShapewiseError):
        get_gpu(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("key, dtype", [("v100", "bf16"), ("v100", "fp8"), ("a100-80gb", "fp8"),
                                        ("mi250x", "tf32"), ("h100", "int8")])
def test_peak_tflops_unsupported_dtype(key, dtype):
    with pytest.raises(ShapewiseError, match=dtype):
        by_key(key).peak_tflops(dtype)


def test_peak_tflops_supported_dtype():
    assert by_key("h100").peak_tflops("bf16") == 989.4
    assert by_key("rtx4090").peak_tflops("fp16") == 165.2  # FP32-accumulate rate, as documented


@given(st.text())
def test_get_gpu_returns_gpu_or_shapewise_error(text):
    try:
        assert isinstance(get_gpu(text), GPU)
    except ShapewiseError:
        pass


@given(st.sampled_from(sorted(TORCH_NAMES)), st.sampled_from(["", " ", "  "]), st.booleans())
def test_torch_names_survive_case_and_padding(torch_name, pad, upper):
    text = pad + (torch_name.upper() if upper else torch_name.lower()) + pad
    assert get_gpu(text).key == TORCH_NAMES[torch_name]
