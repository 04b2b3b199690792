"""Scaling-law fitting: Chinchilla (approaches 1-3), Kaplan, batch/LR laws, critical batch, MoE laws, lr annealing, plan.

    from scaling import fit_chinchilla
    rec = fit_chinchilla(df, drop_highest_k=5, bootstrap=200)   # df has columns N, D, loss
    rec.params, rec.intervals, rec.save("fit.json")

Exports are imported lazily so that `import scaling.cli` (done by `scalelab --help`) stays cheap.
"""
from __future__ import annotations

import importlib

_EXPORTS = {
    "fit_chinchilla": "scaling.chinchilla_approaches",
    "fit_kaplan": "scaling.kaplan_fit",
    "fit_batch_lr": "scaling.batch_lr",
    "fit_chinchilla_by": "scaling.by_compare",
    "fit_batch_lr_by": "scaling.by_compare",
    "fit_critical_batch": "scaling.critical_batch",
    "fit_moe": "scaling.moe_fit",
    "make_moe_plan": "scaling.moe_plan",
    "KrajewskiLaw": "scaling.moe_laws",
    "ClarkLaw": "scaling.moe_laws",
    "fit_lr_annealing": "scaling.lr_annealing",
    "predict_curve": "scaling.lr_annealing_law",
    "AnnealingLaw": "scaling.lr_annealing_law",
    "predict": "scaling.predict",
    "make_plan": "scaling.plan",
    "emit_config": "scaling.plan",
    "to_train_config": "scaling.plan",
    "FitRecord": "scaling.record",
    "load_data": ("scaling.inputs", "load"),
    "read_run_dirs": "scaling.inputs",
    "plot_fit": "scaling.plots",
    "ChinchillaLaw": "scaling.laws",
    "DataConstrainedLaw": "scaling.laws",
    "FrontierLaw": "scaling.laws",
    "KaplanLaw": "scaling.laws",
    "CriticalBatchLaw": "scaling.laws",
    "StepsExamplesLaw": "scaling.laws",
    "ComputeHParamLaw": "scaling.laws",
    "NDHParamLaw": "scaling.laws",
    "PowerLaw": "scaling.laws",
    "InputError": "scaling.errors",
    "FitError": "scaling.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'scaling' has no attribute {name!r}")
    module, attr = target if isinstance(target, tuple) else (target, name)
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
