"""The environment the DeepSpeed launcher hands to ranks on other hosts.

Through pdsh/ssh the launcher forwards only PYTHON*/MLFLOW*/MV2*/UCX* variables (plus a
`.deepspeed_env` file): without the ones below a remote rank would go online for the Hub, lose
W&B's mode and the data root, or take another thread count. Used by the hostfile executor and by a
Slurm task with `launcher: deepspeed`.
"""

from __future__ import annotations

import os
from pathlib import Path

FORWARD_PREFIXES = ("SCALELAB_", "HF_", "WANDB_", "OMP_", "MKL_", "TORCH_", "NCCL_", "GLOO_", "TOKENIZERS_")
FORWARD_NAMES = ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME")
ENV_FILE = ".deepspeed_env"


def write_env_file(run_dir: Path, environ: dict | None = None) -> Path:
    """`<run_dir>/.deepspeed_env` (KEY=VALUE lines, DeepSpeed's format): the forwarded variables, then
    the user's own ~/.deepspeed_env and ./.deepspeed_env lines (theirs win), since DS_ENV_FILE, which
    points the launcher at this file, replaces the name it looks for in those places."""
    environ = dict(os.environ if environ is None else environ)
    lines = {}
    for k, v in sorted(environ.items()):
        if (k in FORWARD_NAMES or k.startswith(FORWARD_PREFIXES)) and not any(c in v for c in '\n"$`\\'):
            lines[k] = v
    for own in (Path.home() / ENV_FILE, Path.cwd() / ENV_FILE):
        if own.is_file():
            for line in own.read_text().splitlines():
                k, sep, v = line.partition("=")
                if sep and k.strip():
                    lines[k.strip()] = v
    path = Path(run_dir) / ENV_FILE
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path
