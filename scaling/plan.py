"""`plan`: combine fit records into a recommendation for a compute budget C.

Answers: N_opt, D_opt (from a Chinchilla fit: approach 3 also predicts the loss), learning rate
and batch size (from a batch-lr fit), the critical batch (from a critical-batch fit), each with
an interval propagated from the records' bootstrap samples, plus the nearest model preset in
configs/models/ and, optionally, a train config for it.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from scaling.common import EXTRAPOLATION_WARN_FACTOR
from scaling.errors import InputError
from scaling.record import FitRecord, _clean

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def configs_dir() -> Path:
    return Path(os.environ.get("SCALELAB_CONFIGS", PROJECT_ROOT / "configs"))


def default_vocab_size() -> int | None:
    """tokenizer.vocab_size of configs/data/default.yaml (the data the emitted config trains on)."""
    import yaml

    p = configs_dir() / "data" / "default.yaml"
    if not p.exists():
        return None
    data = yaml.safe_load(p.read_text()) or {}
    return (data.get("tokenizer") or {}).get("vocab_size")


def model_presets(vocab_size: int) -> list[dict]:
    """Every configs/models/*.yaml preset with its parameter counts (pure Python, no torch)."""
    import yaml

    from models.accounting import count
    from models.config import ModelConfig

    out = []
    for p in sorted((configs_dir() / "models").glob("*.yaml")):
        try:
            cfg = ModelConfig(**(yaml.safe_load(p.read_text()) or {}))
            c = count(cfg, vocab_size)
        except Exception:  # a broken preset is skipped, not fatal for planning
            continue
        out.append({"name": p.stem, "total": c.total, "non_embedding": c.non_embedding, "active": c.active,
                    "flops_per_token": c.flops_per_token, "seq_len": cfg.seq_len})
    return out


def _kind_key(n_kind: str) -> str:
    for k in ("non_embedding", "active"):
        if str(n_kind).startswith(k):
            return k
    return "total"


def nearest_preset(N: float, n_kind: str, vocab_size: int) -> dict | None:
    """The preset whose parameter count (same kind as the fit's N) is nearest N in log space."""
    presets = model_presets(vocab_size)
    if not presets:
        return None
    key = _kind_key(n_kind)
    best = min(presets, key=lambda p: abs(np.log(p[key]) - np.log(N)))
    return dict(best, n_kind=key, N=best[key], ratio_to_N_opt=best[key] / N)


def _interval(samples, ci):
    arr = np.asarray(samples, dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size < 2:
        return None
    return [float(np.percentile(arr, 100 * (1 - ci) / 2)), float(np.percentile(arr, 100 * (1 + ci) / 2))]


def _samples(rec: FitRecord, keys) -> dict | None:
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    if all(k in s for k in keys):
        n = min(len(s[k]) for k in keys)
        return {k: np.asarray([np.nan if v is None else v for v in s[k][:n]], dtype=float) for k in keys}
    return None


def make_plan(fits: list[FitRecord], compute: float, *, vocab_size: int | None = None, ci: float = 0.95) -> dict:
    """Recommendation for compute C (FLOPs) from the given fit records."""
    from scaling import laws

    if not (compute > 0 and np.isfinite(compute)):
        raise InputError(f"--compute must be a positive number of FLOPs (got {compute})")
    alloc = [f for f in fits if f["law"] == "chinchilla"]
    if not alloc:
        raise InputError("plan needs a chinchilla fit record (--fit F.json from `scalelab fit chinchilla`) for N_opt and D_opt")
    if len(alloc) > 1:
        raise InputError("plan takes one chinchilla fit record; got " + str(len(alloc)))
    ch = alloc[0]
    hp = [f for f in fits if f["law"] == "batch-lr"]
    cb = [f for f in fits if f["law"] == "critical-batch"]
    warnings: list[str] = []
    out: dict = {"compute": compute, "ci": ci, "fits": [{"law": f["law"], "approach": f.get("approach"), "data_sha256": f.get("data_sha256")} for f in fits]}
    C = float(compute)
    law = laws.from_record(ch)
    n_opt, d_opt = (float(v) for v in law.compute_optimal(C))
    out["N_opt"], out["D_opt"] = n_opt, d_opt
    out["n_kind"] = ch.get("n_kind", "total")
    n_samp = d_samp = None
    if ch.get("approach") == 3:
        out["loss"] = float(law.predict(n_opt, d_opt))
        s = _samples(ch, ("E", "A", "B", "alpha", "beta"))
        if s:
            with np.errstate(all="ignore"):
                L = laws.ChinchillaLaw(**s)
                n_samp, d_samp = L.compute_optimal(C)
                out["loss_interval"] = _interval(L.predict(n_samp, d_samp), ci)
    else:
        s = _samples(ch, ("N_coef", "a", "D_coef", "b"))
        if s:
            n_samp, d_samp = laws.FrontierLaw(**s).compute_optimal(C)
        warnings.append(f"approach {ch.get('approach')} fit: no loss prediction (only approach 3 predicts loss)")
    if n_samp is not None:
        out["N_opt_interval"] = _interval(n_samp, ci)
        out["D_opt_interval"] = _interval(d_samp, ci)
    else:
        warnings.append("chinchilla fit has no bootstrap samples: no intervals for N_opt/D_opt (fit with --bootstrap N)")
    rng = (ch.get("data_range") or {}).get("C")
    if rng:
        factor = C / rng[1]
        out["extrapolation_factor"] = factor
        if factor > EXTRAPOLATION_WARN_FACTOR:
            warnings.append(f"compute {C:.3g} is {factor:.3g}x the largest fitted run ({rng[1]:.3g} FLOPs): a far extrapolation, intervals understate the risk")
        elif C < rng[0]:
            warnings.append(f"compute {C:.3g} is below the smallest fitted run ({rng[0]:.3g} FLOPs)")
    if hp:
        h = hp[-1]
        hl = laws.from_record(h)
        form = h.get("settings", {}).get("form")
        p = h["params"]
        if form == "nd":
            lr, bt = hl.predict(N=n_opt, D=d_opt)
            keys = ("lr_coef", "lr_exp_N", "lr_exp_D", "bs_coef", "bs_exp_D")
        else:
            lr, bt = hl.predict(C=C)
            keys = ("lr_coef", "lr_exp_C", "bs_coef", "bs_exp_C")
        if any(p.get(k) is None for k in keys):
            warnings.append("batch-lr fit has non-identified exponents: lr/batch predictions are unreliable")
        out["lr"], out["batch_tokens"] = float(lr), float(bt)
        s = _samples(h, keys)
        if s:
            with np.errstate(all="ignore"):
                if form == "nd":
                    k = len(s["lr_coef"])
                    nn = np.resize(n_samp, k) if n_samp is not None else n_opt
                    dd = np.resize(d_samp, k) if d_samp is not None else d_opt
                    lrs, bts = laws.NDHParamLaw(**s).predict(N=nn, D=dd)
                else:
                    lrs, bts = laws.ComputeHParamLaw(**s).predict(C=C)
            out["lr_interval"], out["batch_tokens_interval"] = _interval(lrs, ci), _interval(bts, ci)
        hr = (h.get("data_range") or {}).get("C")
        if hr and C / hr[1] > EXTRAPOLATION_WARN_FACTOR:
            warnings.append(f"batch-lr law extrapolated {C / hr[1]:.3g}x beyond its largest run")
    else:
        warnings.append("no batch-lr fit given: no learning-rate / batch-size recommendation")
    if cb:
        c = cb[-1]
        if "bcrit_coef" in c["params"]:
            out["B_crit_tokens"] = float(laws.from_record(c).predict(n_opt))
            if out.get("batch_tokens") and out["batch_tokens"] > out["B_crit_tokens"]:
                warnings.append(f"recommended batch {out['batch_tokens']:.3g} tokens exceeds the critical batch {out['B_crit_tokens']:.3g}: diminishing returns per token")
    vocab = vocab_size or default_vocab_size()
    out["vocab_size"] = vocab
    if vocab:
        preset = nearest_preset(n_opt, out["n_kind"], vocab)
        if preset:
            preset["tokens_at_compute"] = C / (6.0 * preset["N"])
            out["preset"] = preset
            if not 0.5 <= preset["ratio_to_N_opt"] <= 2.0:
                warnings.append(f"nearest preset {preset['name']} has {preset['N']:.3g} parameters, {preset['ratio_to_N_opt']:.2g}x N_opt: no preset close to the optimum")
    out["warnings"] = warnings
    return _clean(out)


def format_plan(plan: dict) -> str:
    def iv(k):
        v = plan.get(k + "_interval")
        return f"  [{v[0]:.4g}, {v[1]:.4g}]" if v else ""

    lines = [f"compute: {plan['compute']:.4g} FLOPs ({plan.get('ci', 0.95):.0%} intervals)"]
    lines.append(f"N_opt: {plan['N_opt']:.4g} parameters ({plan['n_kind']}){iv('N_opt')}")
    lines.append(f"D_opt: {plan['D_opt']:.4g} tokens{iv('D_opt')}  (D/N = {plan['D_opt'] / plan['N_opt']:.3g})")
    if "loss" in plan:
        lines.append(f"loss: {plan['loss']:.4f}{iv('loss')}")
    if "lr" in plan:
        lines.append(f"lr: {plan['lr']:.4g}{iv('lr')}")
        lines.append(f"batch: {plan['batch_tokens']:.4g} tokens{iv('batch_tokens')}")
    if "B_crit_tokens" in plan:
        lines.append(f"critical batch: {plan['B_crit_tokens']:.4g} tokens")
    p = plan.get("preset")
    if p:
        lines.append(f"nearest preset: {p['name']} ({p['N']:.4g} {p['n_kind']} params, {p['ratio_to_N_opt']:.3g}x N_opt; {p['tokens_at_compute']:.4g} tokens at this compute)")
    for w in plan.get("warnings", []):
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def emit_config(plan: dict, path: str | Path, *, micro_batch_size: int = 16, data: str = "default", name: str | None = None) -> Path:
    """Write a train config (configs/train/*.yaml shape) for the plan's nearest preset.

    Tokens are C / (6 N_preset) so the run spends the planned compute on the preset actually used;
    global_batch_size is the recommended batch in sequences, a multiple of micro_batch_size.
    """
    import yaml

    p = plan.get("preset")
    if not p:
        raise InputError("plan has no model preset (no configs/models/ presets or vocab size): cannot emit a config")
    seq_len = int(p["seq_len"])
    n_seq = max(1, int(round(plan.get("batch_tokens", seq_len * micro_batch_size) / seq_len)))
    micro = max(1, min(micro_batch_size, n_seq))
    gbs = max(micro, int(round(n_seq / micro)) * micro)
    tokens = int(round(p["tokens_at_compute"]))
    cfg = {
        "name": name or f"plan-{p['name']}-C{plan['compute']:.0e}".replace("+", ""),
        "model": p["name"],
        "data": data,
        "optim": {"lr": float(f"{plan['lr']:.4g}")} if "lr" in plan else {},
        "train": {"tokens": max(tokens, gbs * seq_len), "micro_batch_size": micro, "global_batch_size": gbs},
        "extras": {"plan": {k: plan.get(k) for k in ("compute", "N_opt", "D_opt", "loss", "lr", "batch_tokens", "n_kind") if k in plan}},
    }
    if not cfg["optim"]:
        del cfg["optim"]
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = "# Written by `scalelab plan --emit-config`: the compute-optimal run for the planned budget.\n"
    out.write_text(header + yaml.safe_dump(cfg, sort_keys=False))
    return out
