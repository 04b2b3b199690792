"""SYNTHETIC data with known truth, for tests, demos and checking the fits -- never results: runs
drawn from the loss and hyperparameter laws (runs.py), training curves with a known critical batch
(curves.py) and MoE runs (moe.py).

Compatibility shim for one release: `scaling.synthetic` was one module (runs.py now), and notebooks
import its names from here. New code imports `scaling.synthetic.runs`.
"""

from __future__ import annotations

from scaling.synthetic.runs import (
    TRUE_CHINCHILLA,
    TRUE_DATA_CONSTRAINED,
    batch_lr_sweep,
    chinchilla_table,
    critical_batch_table,
    data_constrained_table,
    data_multiplied,
    step_law_sweep,
    write_run_tree,
)

__all__ = [
    "TRUE_CHINCHILLA",
    "TRUE_DATA_CONSTRAINED",
    "batch_lr_sweep",
    "chinchilla_table",
    "critical_batch_table",
    "data_constrained_table",
    "data_multiplied",
    "step_law_sweep",
    "write_run_tree",
]
