"""TF32 for fp32 matmuls (`train.tf32`): set before the first matmul; whether fp32 matmuls then run
in TF32 decides the MFU peak (pretrain/callbacks/speed_monitor.py)."""

from __future__ import annotations

import torch


def set_tf32(device: torch.device, enabled: bool) -> bool:
    """Allow (or forbid) TF32 tensor cores for fp32 matmuls and convolutions on CUDA; returns
    whether fp32 matmuls now run in TF32 (never on CPU, nor on GPUs before Ampere)."""
    if device.type != "cuda":
        return False
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    return enabled and torch.cuda.get_device_capability(device)[0] >= 8
