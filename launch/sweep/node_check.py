"""`python -m launch.sweep.node_check --gpus N`: what a sweep's Slurm array checks on a compute node first.

Submitted as a one-task job before the array (same partition, GPUs, setup and interpreter as its
tasks), which starts only after it ends well: a node whose Python lacks torch or DeepSpeed, or
sees fewer GPUs than the spec asks for, fails this one job with the reason, instead of every run.
Prints one line, `node check: ok ...` or `node check FAILED: ...` (what `sweep status` shows).
"""

from __future__ import annotations

import argparse
import importlib
import socket
import sys

PREFIX_OK, PREFIX_FAILED = "node check: ok", "node check FAILED"


def check(gpus: int) -> tuple[bool, str]:
    found = []
    for name in ("torch", "deepspeed"):
        try:
            mod = importlib.import_module(name)
        except Exception as exc:  # ImportError, or a broken install raising anything at import
            return False, f"{name} does not import with {sys.executable}: {type(exc).__name__}: {exc}"
        found.append(f"{name} {getattr(mod, '__version__', '?')}")
    import torch  # deferred: imports torch

    seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if seen < gpus:
        return False, (
            f"{seen} GPU(s) visible, the spec asks for {gpus} per node (executor.slurm.gpus_per_node); "
            f"CUDA available: {torch.cuda.is_available()}, torch built for CUDA {torch.version.cuda}"
        )
    names = sorted({torch.cuda.get_device_name(i) for i in range(seen)}) if seen else []
    return True, f"{', '.join(found)}, {seen} GPU(s)" + (f" ({', '.join(names)})" if names else "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launch.sweep.node_check")
    ap.add_argument("--gpus", type=int, default=0, help="GPUs the node must show")
    args = ap.parse_args(argv)
    ok, text = check(args.gpus)
    where = f"{socket.gethostname()}, {sys.executable}"
    print(f"{PREFIX_OK if ok else PREFIX_FAILED}: {text} [{where}]", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
