"""Inference-aware allocation (Sardana et al. 2024, "Beyond Chinchilla-Optimal").

A model that will also serve T tokens costs training + inference FLOPs. In the fit's compute
convention a training token costs k(N) (6 N under 6 N D) and an inference token a forward pass,
k(N) / 3 (2 N under 6 N D), so the total is F = k(N) (D + T / 3) = 6 N D + 2 N T.

- `min_total_for_loss`: the (N, D) on the fitted law L(N, D) = E + A/N^alpha + B/D^beta reaching
  loss L with the least F. Along the iso-loss curve, A/N^alpha = s (L - E) and B/D^beta =
  (1 - s)(L - E) for a share s in (0, 1); log F is convex in log N there, so the minimum is unique:
  a logit-s grid brackets it and a bounded scalar search refines it. With T = 0 it is the
  training-only (Chinchilla) optimum for that loss, whose closed form under 6 N D is
  s = beta / (alpha + beta) (`chinchilla_for_loss`).
- `best_loss_for_total`: the lowest loss for a total budget F: D = F / k(N) - T / 3, one
  dimension in log N, bracketed on a grid and refined the same way.
Torch-free; `inference_block` adds the plan's `inference` section with bootstrap intervals.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar

from scaling.core.bootstrap import interval
from scaling.core.conventions import TokenCost, conventions_of
from scaling.core.errors import InputError
from scaling.laws.loss import ChinchillaLaw
from scaling.laws.prediction import predict_loss
from scaling.planning.run_model import PRESET_KEY

GRID = 6001
Z_SPAN = 40.0  # logit of the share s: s from ~4e-18 to 1 - 4e-18


def _k(cost: TokenCost | None, N):
    return 6.0 * np.asarray(N, float) if cost is None else cost(N)


def _split(law, target: float, z):
    """(N, D) on the iso-loss curve at logit share z (share s of L - E spent on the N term)."""
    R = target - law.E
    with np.errstate(all="ignore"):
        s = 1.0 / (1.0 + np.exp(-np.asarray(z, float)))
        N = (law.A / (s * R)) ** (1.0 / law.alpha)
        D = (law.B / ((1.0 - s) * R)) ** (1.0 / law.beta)
    return N, D


def _refine(f, lo: float, hi: float, grid: np.ndarray, vals: np.ndarray) -> float:
    i = int(np.argmin(vals))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(f, bounds=(a, b), method="bounded", options={"xatol": 1e-10})
    return float(res.x) if res.fun <= vals[i] else float(grid[i])


def min_total_for_loss(law, target: float, T: float, cost: TokenCost | None = None) -> tuple[float, float]:
    """(N, D) reaching `target` loss with the least k(N) (D + T/3). NaN when target <= E."""
    if not target > law.E:
        return float("nan"), float("nan")

    def logF(z):
        N, D = _split(law, target, z)
        with np.errstate(all="ignore"):
            return np.log(_k(cost, N)) + np.log(D + T / 3.0)

    z = np.linspace(-Z_SPAN, Z_SPAN, GRID)
    vals = np.where(np.isfinite(v := logF(z)), v, np.inf)
    zs = _refine(lambda x: float(logF(x)), -Z_SPAN, Z_SPAN, z, vals)
    N, D = _split(law, target, zs)
    return float(N), float(D)


def chinchilla_for_loss(law, target: float) -> tuple[float, float]:
    """Closed form under 6 N D: the least-training-FLOPs (N, D) reaching `target` has
    A/N^alpha = beta/(alpha+beta) (L - E) (the Chinchilla frontier through that loss)."""
    if not target > law.E:
        return float("nan"), float("nan")
    s = law.beta / (law.alpha + law.beta)
    R = target - law.E
    return float((law.A / (s * R)) ** (1 / law.alpha)), float((law.B / ((1 - s) * R)) ** (1 / law.beta))


def best_loss_for_total(law, F: float, T: float, cost: TokenCost | None = None) -> tuple[float, float, float]:
    """(N, D, loss) minimising L(N, D) subject to k(N) (D + T/3) = F."""
    hi = np.log(F / 6.0)  # N whose single training token would spend F under 6 N (k >= ~6 N)

    def loss(u):
        N = np.exp(u)
        with np.errstate(all="ignore"):
            D = F / _k(cost, N) - T / 3.0
            L = law.E + law.A / N**law.alpha + law.B / D**law.beta
        return np.where(D > 0, L, np.inf)

    u = np.linspace(0.0, hi, GRID)
    vals = loss(u)
    if not np.isfinite(vals).any():
        return float("nan"), float("nan"), float("nan")
    us = _refine(lambda x: float(loss(x)), 0.0, hi, u, vals)
    N = float(np.exp(us))
    D = float(F / _k(cost, N) - T / 3.0)
    return N, D, float(loss(us))


def _flops(N, D, T, cost):
    k = _k(cost, N)
    return float(k * D), float(k * T / 3.0)


def allocate(
    law, T: float, cost: TokenCost | None, *, target_loss: float | None = None, total: float | None = None
) -> dict:
    """One law's inference-aware plan and its training-only comparison (both reach the same loss)."""
    if target_loss is not None:
        N, D = min_total_for_loss(law, target_loss, T, cost)
        loss = target_loss
    elif total is not None:
        N, D, loss = best_loss_for_total(law, total, T, cost)
    else:
        raise ValueError("allocate: give target_loss or total")
    if not np.isfinite(N):
        return {}
    train, infer = _flops(N, D, T, cost)
    cN, cD = chinchilla_for_loss(law, loss) if cost is None or cost.exact else min_total_for_loss(law, loss, 0.0, cost)
    ctrain, cinfer = _flops(cN, cD, T, cost)
    total_flops = train + infer
    return {
        "N": N,
        "D": D,
        "loss": float(loss),
        "train_flops": train,
        "inference_flops": infer,
        "total_flops": total_flops,
        "chinchilla": {
            "N": cN,
            "D": cD,
            "train_flops": ctrain,
            "inference_flops": cinfer,
            "total_flops": ctrain + cinfer,
        },
        "saving": 1.0 - total_flops / (ctrain + cinfer),
    }


def bootstrap_laws(rec) -> list:
    """The record's bootstrap parameter draws as ChinchillaLaw objects (non-finite draws left out)."""
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    keys = ("E", "A", "B", "alpha", "beta")
    if not all(k in s for k in keys):
        return []
    n = min(len(s[k]) for k in keys)
    out = []
    for i in range(n):
        v = {k: s[k][i] for k in keys}
        if all(x is not None and np.isfinite(x) for x in v.values()):
            out.append(ChinchillaLaw(**v))
    return out


def inference_block(
    rec, inference_tokens: float, *, target_loss: float | None = None, total: float | None = None, ci: float = 0.95
) -> dict:
    """The plan's `inference` section from an approach-3 chinchilla record: N, D, train/inference/
    total FLOPs, the training-only optimum reaching the same loss, the saving, and percentile
    intervals over the record's bootstrap laws (`samples` of them solved; `unreachable` counts the
    laws whose E is at or above the target)."""
    if rec.get("approach") != 3:
        raise InputError(
            "--inference-tokens / --target-loss need an approach-3 chinchilla fit (a loss law L(N, D)); "
            f"this record is approach {rec.get('approach')}"
        )
    if (target_loss is None) == (total is None):
        raise InputError("inference planning takes one of --target-loss L or --compute C (a total budget)")
    T = float(inference_tokens)
    if not (T >= 0 and np.isfinite(T)):
        raise InputError(f"--inference-tokens must be >= 0 (got {inference_tokens})")
    p = rec["params"]
    law = ChinchillaLaw(**{k: p[k] for k in ("E", "A", "B", "alpha", "beta")})
    conv = conventions_of(rec)
    cost = TokenCost.from_record(rec) if rec.get("conventions") else TokenCost(conv["compute"], conv["n_kind"])
    kcost = None if cost.exact else cost
    if target_loss is not None and not target_loss > law.E:
        raise InputError(
            f"--target-loss {target_loss} is at or below the fit's "
            f"irreducible loss E = {law.E:.4g}: no model reaches it"
        )
    out = allocate(law, T, kcost, target_loss=target_loss, total=total)
    if not out:
        raise InputError(
            f"--compute {total:.3g} cannot pay for {T:.3g} inference tokens with any model: raise the budget"
        )
    out = {"mode": "target_loss" if target_loss is not None else "total_compute", "inference_tokens": T, **out}
    out["compute_convention"] = conv["compute"]
    out["n_kind"] = conv["n_kind"]
    per_token = "6*N" if cost.exact else f"k(N) ({conv['compute']}, from the fitted runs)"
    out["convention"] = (
        f"FLOPs in the fit's convention ({conv['compute']}, N = {conv['n_kind']} parameters): training "
        f"{per_token} per token, inference a forward pass = a third "
        f"of it ({'2*N' if cost.exact else 'k(N)/3'}) per token"
    )
    samples = bootstrap_laws(rec)
    if samples:
        draws = [allocate(s, T, kcost, target_loss=target_loss, total=total) for s in samples]
        ok = [d for d in draws if d]
        out["samples"], out["unreachable"] = len(samples), len(samples) - len(ok)
        for key in ("N", "D", "train_flops", "total_flops", "saving") + (("loss",) if total is not None else ()):
            iv = interval([d[key] for d in ok], ci, spread_only=True)
            if iv is not None:
                out[f"{key}_interval"] = iv
        out["_train_flops_samples"] = [d["train_flops"] for d in ok]
        out["_D_samples"] = [d["D"] for d in ok]
    return out


def format_inference(inf: dict) -> list[str]:
    def iv(key):
        v = inf.get(f"{key}_interval")
        return f"  [{v[0]:.4g}, {v[1]:.4g}]" if v else ""

    ch = inf["chinchilla"]
    head = f"inference-aware plan (Sardana et al. 2024) for {inf['inference_tokens']:.4g} inference tokens, " + (
        f"reaching loss {inf['loss']:.4f}"
        if inf["mode"] == "target_loss"
        else f"total budget {inf['total_flops']:.4g} FLOPs"
    )
    lines = [head, f"  {inf['convention']}"]
    if inf["mode"] == "total_compute":
        lines.append(f"  best loss: {inf['loss']:.4f}{iv('loss')}")
    lines += [
        f"  N: {inf['N']:.4g} parameters{iv('N')}   D: {inf['D']:.4g} "
        f"tokens{iv('D')}  (D/N = {inf['D'] / inf['N']:.3g})",
        f"  FLOPs: training {inf['train_flops']:.4g}{iv('train_flops')} + inference "
        f"{inf['inference_flops']:.4g} = total {inf['total_flops']:.4g}{iv('total_flops')}",
        "  training-only (Chinchilla) optimum for the same loss: N "
        f"{ch['N']:.4g}, D {ch['D']:.4g}, total {ch['total_flops']:.4g} FLOPs",
        f"  saving: {inf['saving']:.2%} of the total FLOPs"
        + (f"  [{sv[0]:.2%}, {sv[1]:.2%}]" if (sv := inf.get("saving_interval")) else ""),
    ]
    r = inf.get("run")
    if r:
        lines.append(
            f"  run: preset {r['preset']} ({r['N']:.4g} {r['n_kind']} "
            f"params, {r['ratio_to_N']:.3g}x N; {r['choice']}), "
            f"{r['tokens']:.4g} tokens, total {r['total_flops']:.4g} FLOPs; predicted loss {r['loss']:.4f}"
            f"  [{r['loss_interval'][0]:.4g}, {r['loss_interval'][1]:.4g}]"
            + (f"; its training: {r['device_hours']:,.4g} device-hours" if r.get("device_hours") else "")
            + (f", ${r['usd']:,.0f}" if r.get("usd") else "")
        )
    if inf.get("unreachable"):
        lines.append(
            f"  note: the target is below E in {inf['unreachable']} of "
            f"{inf['samples']} bootstrap laws (left out of the intervals)"
        )
    return lines


def choose_preset(rec, inf: dict, presets: list[dict], ci: float = 0.95) -> dict | None:
    """The configs/models/ preset to train for an inference plan (`presets`: plan.model_presets),
    each priced exactly in the fit's convention with its own per-token cost k: for a target loss
    the preset reaching it with the least k (D + T/3), D on the iso-loss curve; for a total budget
    the preset with the lowest loss at D = F/k - T/3. Its loss comes with a prediction interval."""
    p = rec["params"]
    law = ChinchillaLaw(**{k: p[k] for k in ("E", "A", "B", "alpha", "beta")})
    key, conv, T = PRESET_KEY.get(inf["n_kind"], "total"), inf["compute_convention"], inf["inference_tokens"]
    rows = []
    for pr in presets:
        N, k = float(pr[key]), float(pr["k"][conv])
        if inf["mode"] == "target_loss":
            rest = inf["loss"] - law.E - law.A / N**law.alpha
            if rest <= 0:
                continue  # this size never reaches the target
            D = (law.B / rest) ** (1.0 / law.beta)
            score = k * (D + T / 3.0)
        else:
            D = inf["total_flops"] / k - T / 3.0
            if D <= 0:
                continue
            score = float(law.predict(N, D))
        rows.append((score, pr, N, k, D))
    if not rows:
        return None
    _, pr, N, k, D = min(rows, key=lambda r: r[0])
    pred = predict_loss(rec, N, D, ci)
    return {
        "preset": pr["name"],
        "n_kind": key,
        "N": N,
        "params": pr["total"],
        "seq_len": pr["seq_len"],
        "tokens": D,
        "train_flops": k * D,
        "inference_flops": k * T / 3.0,
        "total_flops": k * (D + T / 3.0),
        "ratio_to_N": N / inf["N"],
        "loss": pred["loss"],
        "loss_interval": pred["interval"],
        "loss_interval_kind": pred["interval_kind"],
        "compute": {c: v * D for c, v in pr["k"].items()},
        "choice": "least total FLOPs reaching the target loss"
        if inf["mode"] == "target_loss"
        else "lowest predicted loss within the total budget",
    }
