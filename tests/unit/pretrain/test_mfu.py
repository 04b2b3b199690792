"""The MFU peak is the one of the precision the matmuls actually run in: fp32 is measured against
TF32 only when TF32 is on, SXM and PCIe parts have their own peaks, and train.tf32 leaves CPU runs
as they were."""

from __future__ import annotations

import pytest
import torch

from pretrain.callbacks.speed_monitor import device_peak, gpu_peak, matmul_precision
from pretrain.engine.tf32 import set_tf32


@pytest.mark.parametrize(
    "precision,tf32,used",
    [
        ("fp32", True, "tf32"),
        ("fp32", False, "fp32"),
        ("bf16", True, "bf16"),
        ("bf16", False, "bf16"),
        ("fp16", True, "fp16"),
    ],
)
def test_matmul_precision(precision, tf32, used):
    assert matmul_precision(precision, tf32) == used


@pytest.mark.parametrize(
    "name,precision,peak",
    [
        ("NVIDIA H100 80GB HBM3", "bf16", 989e12),
        ("NVIDIA H100 80GB HBM3", "tf32", 494e12),
        ("NVIDIA H100 80GB HBM3", "fp32", 67e12),  # plain FP32: not the TF32 tensor-core peak
        ("NVIDIA H100 PCIe", "bf16", 756e12),
        ("NVIDIA H100 PCIe", "tf32", 378e12),
        ("NVIDIA H100 PCIe", "fp32", 51e12),
        ("NVIDIA A100-SXM4-80GB", "tf32", 156e12),
        ("NVIDIA A100-SXM4-80GB", "fp32", 19.5e12),
        ("NVIDIA H200", "bf16", 989e12),
        ("NVIDIA L40S", "tf32", 183e12),
    ],
)
def test_gpu_peak_by_device_and_precision(name, precision, peak):
    assert gpu_peak(name, precision) == peak


def test_unknown_gpus_have_no_peak():
    assert gpu_peak("NVIDIA H100 NVL", "bf16") is None  # other clocks than SXM: no wrong row
    assert gpu_peak("Tesla V100-SXM2-16GB", "bf16") is None


def test_fp32_without_tf32_is_not_measured_against_the_tf32_peak():
    """The choice a run makes (what SpeedMonitor calls): fp32 with TF32 off gets the FP32 peak."""
    h100 = "NVIDIA H100 80GB HBM3"
    on, off = gpu_peak(h100, matmul_precision("fp32", True)), gpu_peak(h100, matmul_precision("fp32", False))
    assert on == 494e12 and off == 67e12
    # the override wins whatever the precision
    assert device_peak(torch.device("cpu"), "fp32", override=1e12, tf32=True) == (1e12, "config")


def test_tf32_has_no_effect_on_cpu():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    assert set_tf32(torch.device("cpu"), True) is False
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    peak, source = device_peak(torch.device("cpu"), "fp32", tf32=True)
    assert source == "measured-cpu-fp32" and peak > 0
