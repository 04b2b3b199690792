"""`train.compile`: what torch.compile's backend needs on this machine, checked before any work.

The model is compiled through DeepSpeed's `engine.compile(backend=...)` (pretrain/engine/train_module.py),
which compiles the engine's module in place (`nn.Module.compile`), so parameter names, checkpoints
and exports are those of the eager model. Compilation itself happens lazily, in the first steps;
a missing toolchain would only show there, after data preparation and engine set-up, as an
internal compiler error. Inductor generates C++ (compiled with the system's C++ compiler) on CPU
and Triton kernels on CUDA.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

from pretrain.config.schema import TrainConfig
from pretrain.errors import ConfigError


def cxx_compiler() -> str | None:
    """The C++ compiler inductor would use on CPU ($CXX, else g++, c++ or clang++ on PATH)."""
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def check_compile(cfg: TrainConfig, cuda: bool) -> None:
    """ConfigError (exit 2) when train.compile cannot work here; nothing when it is off."""
    t = cfg.train
    if not t.compile or t.compile_backend != "inductor":
        return
    if cuda and importlib.util.find_spec("triton") is None:
        raise ConfigError(
            "invalid configuration:\n  train.compile: the inductor backend on CUDA needs Triton, which is "
            "not installed (pip install triton, the version your torch names); or set "
            "train.compile_backend: aot_eager, or train.compile: false"
        )
    if not cuda and cxx_compiler() is None:
        raise ConfigError(
            "invalid configuration:\n  train.compile: the inductor backend on CPU compiles generated C++ "
            "and no C++ compiler was found ($CXX, g++, c++ or clang++ on PATH); install one (e.g. apt-get "
            "install g++), or set train.compile_backend: aot_eager, or train.compile: false"
        )
