"""Pricing a given run: its hardware FLOPs and device-hours (torch-free).

hardware FLOPs = training FLOPs per token (models/accounting.py: 6 x active matmul parameters +
attention, the count the trainer's MFU is measured against) x tokens; device-hours = hardware FLOPs
/ (peak FLOP/s x MFU x 3600). It lives beside the accounting it prices, below the device table
(rundir/accelerators.py), so the caller passes the peak: the plan (scaling) and `train --dry-run`
(pretrain) price runs the same way without either importing the other.
"""

from __future__ import annotations

from models.accounting import model_counts
from models.config import ModelConfig


def price(flops_per_token: float, tokens: float, peak_flops: float, mfu: float, num_devices: int = 1) -> dict:
    """{hardware_flops, device_hours, days} of training `tokens` tokens at `mfu` of `peak_flops`."""
    if not (flops_per_token > 0 and tokens > 0 and peak_flops > 0 and 0 < mfu <= 1 and num_devices >= 1):
        raise ValueError("flops_per_token, tokens and peak_flops must be > 0, mfu in (0, 1], num_devices >= 1")
    hardware = flops_per_token * tokens
    hours = hardware / (peak_flops * mfu) / 3600.0
    return {"hardware_flops": hardware, "device_hours": hours, "days": hours / 24.0 / num_devices}


def price_model(cfg: ModelConfig, tokens: float, peak_flops: float, mfu: float, num_devices: int = 1) -> dict:
    """`price` for a model config (its FLOPs per token at its seq_len, MoE by its active parameters)."""
    return price(model_counts(cfg).flops_per_token, tokens, peak_flops, mfu, num_devices)


def implied_mfu(hardware_flops: float, device_hours: float, peak_flops: float) -> float:
    """The MFU a reported device-hour count implies for these hardware FLOPs."""
    if not (hardware_flops > 0 and device_hours > 0 and peak_flops > 0):
        raise ValueError("hardware_flops, device_hours and peak_flops must be > 0")
    return hardware_flops / (device_hours * 3600.0 * peak_flops)
