"""Accuracy from loss through a fitted sigmoid: one task's accuracy for a set of loss draws (`through_sigmoid`,
the accuracy chain's last link: scaling.planning.accuracy_chain) and `scalelab predict` of an accuracy record
at the losses of a table or a run tree (`predict_accuracy_rows`, the accuracy family's `predict`).

The interval is additive: each loss draw through a bootstrap sigmoid plus a resampled residual of the fit
(scaled by sqrt(n / (n - 4)) for the 4 fitted parameters), clipped to [0, 1].
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from scaling.core.bootstrap import interval
from scaling.core.errors import InputError
from scaling.data.columns import parse_columns
from scaling.fits.accuracy import ROLES, SigmoidAccuracy, load_runs, load_table
from scaling.fits.prediction import Prediction, add_columns, extrapolation, finish, input_columns, interval_kind
from scaling.laws.prediction import RESIDUAL_DRAWS

SIGMOID = ("a", "b", "k", "L0")


def through_sigmoid(r: dict, ld: dict, ci: float, seed: int) -> dict:
    """One task's accuracy for the loss draws `ld` ({point, draws, param_draws}) through its sigmoid
    `r` (a task's fit): {task_loss, task_loss_interval, acc, interval, parameter_interval, ...}."""
    point = SigmoidAccuracy(**{k: r["params"][k] for k in SIGMOID})
    L, Lp = np.asarray(ld["draws"], float), ld["param_draws"]
    s = (r.get("bootstrap") or {}).get("samples") or {}
    rng = np.random.default_rng(seed + 1)
    if all(k in s for k in SIGMOID):
        P = {k: np.asarray([np.nan if v is None else v for v in s[k]], float) for k in SIGMOID}
        ok = np.all([np.isfinite(v) for v in P.values()], axis=0)
        P = {k: v[ok] for k, v in P.items()}
    else:
        P = None
    if not P or not P["a"].size:
        P = {k: np.asarray([r["params"][k]]) for k in SIGMOID}
    j = np.arange(L.size) % P["a"].size  # pair loss draws with the sigmoids in turn
    curves = SigmoidAccuracy(*(P[k][j] for k in SIGMOID))
    res = np.asarray(r.get("residuals") or [0.0], float)
    if res.size > len(SIGMOID):  # residuals of a 4-parameter fit understate the scatter: scale by sqrt(n / (n - 4))
        res = res * np.sqrt(res.size / (res.size - len(SIGMOID)))
    draws = np.clip(curves.predict(L) + rng.choice(res, size=L.size), 0.0, 1.0)
    out = {
        "task_loss": ld["point"],
        "task_loss_interval": interval(L, ci),
        "acc": float(point.predict(ld["point"])),
        "interval": interval(draws, ci),
        "chance": r.get("chance"),
        "loss_range": r.get("loss_range"),
    }
    if Lp is not None and Lp.size:
        jp = np.arange(Lp.size) % P["a"].size
        out["parameter_interval"] = interval(SigmoidAccuracy(*(P[k][jp] for k in SIGMOID)).predict(Lp), ci)
    if not (r.get("bootstrap") or {}).get("samples"):
        out["note"] = (
            "the accuracy fit has no bootstrap samples: its parameter "
            "uncertainty is not in the interval (fit with --bootstrap N)"
        )
    return out


def predict_accuracy_rows(rec, data, columns: list[str] | None, ci: float, seed: int) -> Prediction:
    """Accuracy at DATA's losses through the record's sigmoid(s), one per task."""
    import pandas as pd  # deferred: pandas is slow to import

    st = rec.get("settings") or {}
    per = rec.get("tasks") or {}
    if isinstance(data, (str, Path)) and Path(data).is_dir():
        metric = {"gold_bpb": "bpb", "gold_nats": "nats", "val_loss": "val_loss"}.get(
            st.get("loss_metric") or "", "bpb"
        )
        acc_metric = st.get("acc_metric") or "acc"
        df, source, warnings = load_runs(data, loss_metric=metric, acc_metric=acc_metric, steps="last", tasks=None)
    else:
        cols = parse_columns(columns, ROLES)
        df, source = load_table(data, cols, optional=("task", "acc"))
        warnings = []
    if not per:  # one sigmoid: every row is its task
        groups = [(None, rec, df)]
    else:
        if "task" not in df.columns:
            if len(per) != 1:
                raise InputError(
                    f"the accuracy fit holds one sigmoid per task ({', '.join(per)}): "
                    "the data needs a task column (--col task=NAME)"
                )
            df = df.assign(task=next(iter(per)))
        df = df.assign(task=df["task"].astype(str))
        unknown = sorted(set(df["task"]) - set(per))
        if unknown:
            warnings.append(f"task(s) without a sigmoid in the fit left out: {', '.join(unknown)}")
        groups = [(t, per[t], g) for t, g in df.groupby("task", sort=False) if t in per]
        if not groups:
            raise InputError(
                f"no task of the data is in the accuracy fit (fit: {', '.join(per)}; data: {', '.join(unknown)})"
            )
    parts, with_draws = [], True
    for _, r, g in groups:
        L = g["loss"].to_numpy(float)
        if not np.all(np.isfinite(L)):
            raise InputError(f"column loss has {int((~np.isfinite(L)).sum())} missing or non-numeric value(s)")
        S = len(((r.get("bootstrap") or {}).get("samples") or {}).get("a") or [])
        with_draws &= S > 1
        n_draws = S * RESIDUAL_DRAWS if S > 1 else 5000
        pred, lo, hi = [], [], []
        for x in L:
            t = through_sigmoid(r, {"point": x, "draws": np.full(n_draws, x), "param_draws": None}, ci, seed)
            iv = t.get("interval") or [np.nan, np.nan]
            pred.append(t["acc"])
            lo.append(iv[0])
            hi.append(iv[1])
        out = input_columns(g, ("loss",))
        measured = g["acc"].to_numpy(float) if "acc" in g.columns else None
        add_columns(out, "acc", True, np.asarray(pred), np.asarray(lo, float), np.asarray(hi, float), measured)
        f = extrapolation({"loss": L}, {"loss": r.get("loss_range")})
        out["extrapolation_factor"] = f if f is not None else np.nan
        parts.append(out)
    frame = pd.concat(parts, ignore_index=True)
    conv = {"loss_metric": st.get("loss_metric"), "acc_metric": st.get("acc_metric"), "source": source}
    return finish(frame, ["acc"], conv, interval_kind(with_draws, additive=True), warnings, ci)
