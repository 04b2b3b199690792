"""Scaling-law fitting: Chinchilla (approaches 1-3), Kaplan, batch/LR laws, critical batch, MoE laws, lr annealing,
plan.

    from scaling import fit_chinchilla
    rec = fit_chinchilla(df, drop_highest_k=5, bootstrap=200)   # df has columns N, D, loss
    rec.params, rec.intervals, rec.save("fit.json")

Subpackages, bottom to top; each imports only those below it (pyproject.toml's import contracts):

    core                           errors, bootstrap, conventions, objectives, optimiser, run selection
    data | laws                    tables and run directories read (the router study's too) | the law classes
    fits                           the law families: fitters (MoE and lr annealing too), their shared pipeline,
                                   the fit record, what each family predicts
    planning                       fit records -> the run for a budget (cost, layout, ..., MoE's); predict
    synthetic                      synthetic data with a known truth
    cli                            the `scalelab fit | predict | plan | model design` commands

Exports are imported lazily so that `import scaling.cli` (done by `scalelab --help`) stays cheap.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "fit_chinchilla": "scaling.fits.chinchilla.approaches",
    "fit_kaplan": "scaling.fits.kaplan",
    "fit_batch_lr": "scaling.fits.batch_lr",
    "fit_chinchilla_by": "scaling.fits.by.compare",
    "fit_batch_lr_by": "scaling.fits.by.compare",
    "fit_critical_batch": "scaling.fits.critical_batch",
    "fit_moe": "scaling.fits.moe.fit",
    "make_moe_plan": "scaling.planning.moe_plan",
    "KrajewskiLaw": "scaling.laws.moe",
    "ClarkLaw": "scaling.laws.moe",
    "fit_lr_annealing": "scaling.fits.lr_annealing.fit",
    "predict_curve": "scaling.laws.lr_annealing",
    "AnnealingLaw": "scaling.laws.lr_annealing",
    "predict": "scaling.planning.predict",
    "make_plan": "scaling.planning.plan",
    "emit_config": "scaling.planning.emit",
    "to_train_config": "scaling.planning.emit",
    "FitRecord": "scaling.fits.record",
    "PlanRecord": "scaling.planning.record",
    "load_data": ("scaling.data.inputs", "load"),
    "read_run_dirs": "scaling.data.inputs",
    "plot_fit": "scaling.fits.plots",
    "ChinchillaLaw": "scaling.laws.loss",
    "DataConstrainedLaw": "scaling.laws.loss",
    "FrontierLaw": "scaling.laws.loss",
    "KaplanLaw": "scaling.laws.loss",
    "CriticalBatchLaw": "scaling.laws.hparams",
    "StepsExamplesLaw": "scaling.laws.hparams",
    "ComputeHParamLaw": "scaling.laws.hparams",
    "NDHParamLaw": "scaling.laws.hparams",
    "PowerLaw": "scaling.laws.hparams",
    "InputError": "scaling.core.errors",
    "FitError": "scaling.core.errors",
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
