"""Accelerator peaks for cost projections: the table (rundir/accelerators.py, shared with the trainer's
MFU) and its CLI-facing lookup, which names the allowed values in its errors."""

from __future__ import annotations

from rundir.accelerators import DATASHEETS, DEVICES, FP8_FLOPS, PRECISIONS, device_from_name
from scaling.core.errors import InputError

__all__ = ["DATASHEETS", "DEVICES", "PRECISIONS", "device_from_name", "peak_flops"]


def peak_flops(device: str, precision: str = "bf16") -> float:
    """Peak dense FLOP/s of one `device` at `precision`; InputError naming the allowed values."""
    if device not in DEVICES:
        raise InputError(f"--device {device!r} is not in the device table (choose from {', '.join(DEVICES)})")
    if precision == "fp8":  # Transformer Engine's fp8 GEMMs (scaling/planning/perf_model.py)
        if device not in FP8_FLOPS:
            raise InputError(f"--precision fp8: {device} has no fp8 peak (fp8 devices: {', '.join(FP8_FLOPS)})")
        return FP8_FLOPS[device]
    if precision not in DEVICES[device]:
        raise InputError(f"--precision {precision!r}: choose from {', '.join(DEVICES[device])}")
    return DEVICES[device][precision]
