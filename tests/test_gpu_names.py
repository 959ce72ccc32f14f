"""A GPU named with more than shapewise knows is read as the nearest and said; a name of two GPUs, or
of one the table does not hold (GH200), is refused; a name several products share is said."""

import warnings

import pytest

from shapewise import ShapewiseWarning, hardware
from shapewise.errors import ShapewiseError
from shapewise.hardware import get_gpu


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(hardware, "_SAID_NEAREST", set())  # each test hears its warnings


@pytest.mark.parametrize("name, key, said", [
    ("Tesla V100-SXM2-16GB", "v100", "'16gb' is not in its name"),
    ("Tesla V100-PCIE-16GB", "v100", "'pcie 16gb' is not in its name"),
    ("NVIDIA H20-3e", "h20", "'3e' is not in its name"),
    ("NVIDIA L4 foo", "l4", "'foo' is not in its name"),
    ("a100", "a100-80gb", "it also names a100-40gb, a100-40gb-pcie, a100-80gb-pcie"),
])
def test_a_name_read_as_the_nearest_is_said(name, key, said):
    with pytest.warns(ShapewiseWarning, match=said):
        assert get_gpu(name).key == key


@pytest.mark.parametrize("name", ["h100 h200", "a100-80gb a100-40gb"])
def test_a_name_of_two_gpus_is_refused(name):
    with pytest.raises(ShapewiseError, match="names more than one GPU"):
        get_gpu(name)


def test_gh200_is_not_read_as_an_h200():
    with pytest.raises(ShapewiseError, match="unknown GPU 'NVIDIA GH200 480GB'.*h200"):
        get_gpu("NVIDIA GH200 480GB")


@pytest.mark.parametrize("name, key", [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"), ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"), ("NVIDIA A100-PCIE-40GB", "a100-40gb-pcie"),
    ("NVIDIA GeForce RTX 4090", "rtx4090"), ("NVIDIA L40S", "l40s"), ("NVIDIA B200", "b200"),
    ("AMD Instinct MI300X", "mi300x"), ("h100-pcie", "h100-pcie"), ("NVIDIA H100 SXM5 80GB", "h100"),
])
def test_torch_device_names_and_keys_are_read_without_a_word(name, key):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShapewiseWarning)
        assert get_gpu(name).key == key
