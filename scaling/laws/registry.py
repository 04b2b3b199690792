"""The law object of a fit record: `from_record` reads the record's law name (and its approach,
form or settings.law) and builds that law's class from the record's point estimate."""

from __future__ import annotations

from dataclasses import asdict

from scaling.laws.hparams import ComputeHParamLaw, NDHParamLaw, PowerLaw
from scaling.laws.loss import ChinchillaLaw, DataConstrainedLaw, FrontierLaw, KaplanLaw
from scaling.laws.lr_annealing import law_from_record
from scaling.laws.moe import law_from_params


def _pick(params: dict, cls) -> dict:
    names = [f for f in cls.__dataclass_fields__ if f != "form"]
    return {k: params.get(k) for k in names}


def from_record(rec) -> object:
    """The law object for a fit record's point estimate."""
    law, p = rec["law"], rec["params"]
    if law == "chinchilla":
        if rec.get("approach") in (1, 2):
            return FrontierLaw(**_pick(p, FrontierLaw))
        if (rec.get("settings") or {}).get("law") == "data-constrained":
            return DataConstrainedLaw(**_pick(p, DataConstrainedLaw))
        return ChinchillaLaw(**_pick(p, ChinchillaLaw))
    if law == "kaplan":
        return KaplanLaw(form=rec.get("settings", {}).get("form", "nd"), **_pick(p, KaplanLaw))
    if law == "batch-lr":
        if rec.get("settings", {}).get("form") == "nd":
            return NDHParamLaw(**_pick(p, NDHParamLaw))
        return ComputeHParamLaw(**_pick(p, ComputeHParamLaw))
    if law == "critical-batch":
        return PowerLaw(coef=p["bcrit_coef"], exp=p["bcrit_exp_N"])
    if law == "moe":  # Krajewski's L(N, D, G) or Clark's L(N, E): scaling.laws.moe
        return law_from_params((rec.get("settings") or {}).get("law", "krajewski"), p)
    if law == "lr-annealing":
        return law_from_record(rec)
    raise ValueError(f"unknown law '{law}'")


def as_dict(law) -> dict:
    return asdict(law)
