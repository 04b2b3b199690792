"""`plan`: combine fit records into a recommendation for a compute budget C.

Answers, in the Chinchilla record's conventions (compute kind and N kind, stated in the output):
- the continuous optimum N_opt, D_opt (approach 3 also predicts its loss);
- the run to train: the configs/models/ preset with the lowest predicted loss at C (approach 3;
  nearest N_opt in log space for approaches 1-2), its tokens D = C / k(preset) in the same
  convention, its predicted loss with a prediction interval, and its learning rate and batch
  from a batch-lr fit (evaluated at that run's own N, D and C in the batch-lr fit's convention);
- every warning of the fits used, and the plan's own (extrapolation, data repetition, a batch-lr
  law used outside the range it was fitted on).
`scaling.planning.emit.to_train_config` turns the plan into that run's train config, carrying the
fits' training recipe (schedule, warmup, weight decay, sequence length, data), so the run is trained
like the runs the law saw; `emit_config` writes it.
"""

from __future__ import annotations

import numpy as np

from scaling.core.errors import InputError
from scaling.fits.record import FitRecord, _clean
from scaling.planning.planner import PlanDraft
from scaling.planning.planners import planners
from scaling.planning.record import PlanRecord
from scaling.planning.verdict import IDENTIFIED_SPAN


def _fit_warnings(fits: list[FitRecord]) -> list[str]:
    out = []
    for f in fits:
        name = f["law"] + (f" approach {f['approach']}" if f.get("approach") else "")
        out += [f"{name} fit: {w}" for w in f.get("warnings") or []]
    return out


def make_plan(
    fits: list[FitRecord],
    compute: float,
    *,
    vocab_size: int | None = None,
    ci: float = 0.95,
    compute_kind: str | None = None,
    unique_tokens: float | None = None,
    presets_only: bool = False,
    shape_rule: str | None = None,
    identified_span: float = IDENTIFIED_SPAN,
) -> PlanRecord:
    """Recommendation for compute C (in the Chinchilla record's convention) from the given fits.
    A data-constrained law allocates C for `unique_tokens` unique training tokens (default: the
    fitted runs' data set, when they share one): few unique tokens shrink N_opt.
    Several chinchilla records of different approaches: the approach-3 one plans, the others are
    compared with it on the compute-optimal exponent (the plan's `verdict`, scaling.planning.verdict).
    Each law's records are planned by its registered planner (scaling.planning.planner): the allocating
    law's first, then the others' in the law families' order; records of a law with no planner (or one that
    plans alone, or feeds an option of its own) are listed in the plan's `fits` and otherwise unused."""
    if not (compute > 0 and np.isfinite(compute)):
        raise InputError(f"--compute must be a positive number of FLOPs (got {compute})")
    known = planners()
    allocating = [p for p in known if p.allocates]
    given = [p for p in allocating if any(f["law"] == p.law for f in fits)]
    if not given:
        names = " or ".join(p.law for p in allocating)
        raise InputError(
            f"plan needs a {names} fit record (--fit F.json from `scalelab fit {allocating[0].law}`) "
            "for N_opt and D_opt"
        )
    if len(given) > 1:
        raise InputError(f"plan takes the records of one allocating law, got {', '.join(p.law for p in given)}")
    draft = PlanDraft(
        compute=float(compute),
        ci=ci,
        fits=fits,
        warnings=_fit_warnings(fits),
        vocab_size=vocab_size,
        compute_kind=compute_kind,
        unique_tokens=unique_tokens,
        presets_only=presets_only,
        shape_rule=shape_rule,
        identified_span=identified_span,
    )
    lead = given[0]
    assert lead.apply is not None, f"the allocating {lead.law!r} planner has no apply"
    lead.apply(draft, draft.records(lead.law))
    for planner in known:
        if planner.allocates or planner.apply is None:  # a chain's input or a law that plans alone
            continue
        records = draft.records(planner.law)
        if records:
            planner.apply(draft, records)
        elif planner.missing:
            draft.warnings.append(planner.missing)
    draft.out["warnings"] = draft.warnings
    if lead.finish:
        lead.finish(draft)
    return PlanRecord(_clean(draft.out))


def budget(rec: FitRecord, multiplier: float) -> float:
    """`multiplier` x the largest IsoFLOP budget `rec` was fitted on (its largest compute when it has
    no anchors outside the budgets), in the record's own convention."""
    rng = (rec.get("data_range") or {}).get("C_budgets") or (rec.get("data_range") or {}).get("C")
    if not rng:
        raise InputError(f"{rec['law']} fit record has no data_range.C: cannot size a budget relative to its runs")
    return float(multiplier) * float(rng[1])
