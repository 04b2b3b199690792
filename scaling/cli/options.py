"""What the scaling commands share before any work: argument types, the device and compute-kind
names (light copies: no numpy at `scalelab --help`), output checks and the one-line error exit."""

from __future__ import annotations

import sys
from pathlib import Path

from scaling.fits.flags import COMPUTE_KINDS, positive_float  # noqa: F401  (the law families' argument types)

DEVICE_NAMES = (
    "a100-40gb",
    "a100-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "mi300x",
    "l4",
    "l40s",
    "h800",
    "tpu-v4",
)  # scaling.planning.devices.DEVICES


def fail(msg: str, code: int) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return code


def check_outputs(args) -> str | None:
    """Validate options before any work: interval level, output locations."""
    if hasattr(args, "ci") and not 0 < args.ci < 1:
        return f"--ci must be between 0 and 1 (got {args.ci})"
    if getattr(args, "bootstrap", 0) < 0:
        return f"--bootstrap must be >= 0 (got {args.bootstrap})"
    plot = getattr(args, "plot", None)
    if plot and Path(plot).suffix.lower() not in (".png", ".pdf", ".svg"):
        return f"--plot {plot}: use a .png, .pdf or .svg file name"
    for opt in ("out", "plot", "emit_config"):
        v = getattr(args, opt, None)
        if v and Path(v).exists() and Path(v).is_dir():
            return f"--{opt.replace('_', '-')} {v} is a directory"
    return None
