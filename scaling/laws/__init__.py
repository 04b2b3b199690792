"""The scaling laws as small objects: loss laws (loss.py), hyperparameter laws (hparams.py), MoE laws
(moe.py), the lr-annealing law (lr_annealing.py), compute-optimal allocation (allocation.py), the
compute multiplier between two laws (multiplier.py), loss predictions with intervals (prediction.py)
and the law of a fit record (registry.py).

Compatibility shim for one release: `scaling.laws` was one module, and notebooks import its names
from here (`from scaling.laws import ChinchillaLaw, from_record`). New code imports the submodule
that defines a name, or `from scaling import ChinchillaLaw`.
"""

from __future__ import annotations

from scaling.laws.hparams import (
    DEEPSEEK_2024,
    KAPLAN_2020_BCRIT,
    STEP_LAW_2025,
    ComputeHParamLaw,
    CriticalBatchLaw,
    NDHParamLaw,
    PowerLaw,
    StepsExamplesLaw,
)
from scaling.laws.loss import (
    EPOCH_2024,
    HOFFMANN_2022,
    KAPLAN_2020_ND,
    MUENNIGHOFF_2023,
    ChinchillaLaw,
    DataConstrainedLaw,
    FrontierLaw,
    KaplanLaw,
)
from scaling.laws.registry import as_dict, from_record

__all__ = [
    "DEEPSEEK_2024",
    "EPOCH_2024",
    "HOFFMANN_2022",
    "KAPLAN_2020_BCRIT",
    "KAPLAN_2020_ND",
    "MUENNIGHOFF_2023",
    "STEP_LAW_2025",
    "ChinchillaLaw",
    "ComputeHParamLaw",
    "CriticalBatchLaw",
    "DataConstrainedLaw",
    "FrontierLaw",
    "KaplanLaw",
    "NDHParamLaw",
    "PowerLaw",
    "StepsExamplesLaw",
    "as_dict",
    "from_record",
]
