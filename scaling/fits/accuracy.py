"""Task accuracy from task loss: Acc(L) = a / (1 + exp(-k (L - L0))) + b (OLMo's ladder, Bhagia
et al. 2024, step 2), fitted per task (`scalelab fit accuracy DATA`).

DATA is a table (columns loss, acc, optional task) or a run-directory tree: each finished run's
`evals/<step>.json` (the last evaluated step, or every one with `steps="all"`), loss = the task's
gold-continuation bits per byte (`gold_bpb`, OLMo's), `gold_nats` or the run's validation loss,
acc = `acc` or `acc_norm` (scaling.data.eval_points). The record states which (`settings.loss_metric`).
Parametrisation: a > 0 and k < 0, so b is the accuracy at high loss (chance, for a task with a
floor) and a + b the ceiling at low loss; L0 is the loss at mid-height. (The form is symmetric
under a -> -a, k -> -k, b -> b + a; the signs pin one branch.) Least squares in accuracy over
(f, b, k, L0) with a = f (1 - b), f in (0, 1], b in [0, 1], k < 0 (so 0 <= b < a + b <= 1: an
accuracy, never above 1), from several starts; bootstrap resamples rows.
Warnings: accuracies at chance (no signal: `--chance`, else the task's own chance from its
evaluations: 1 / number of choices), a flat fit (the curve changes less than FLAT_DELTA over the
data: a, k, L0 not identified), a mid-point outside the data (only one tail of the sigmoid seen).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scaling.core.bootstrap import interval as bootstrap_interval
from scaling.core.bootstrap import percentile_intervals, resample_indices, run_bootstrap
from scaling.core.errors import FitError, InputError
from scaling.data.eval_points import check_options, parse_tasks, read_eval_points
from scaling.data.table_files import read_table
from scaling.fits.record import data_sha256, make_record

ROLES = ("loss", "acc", "task")
FLAT_DELTA = 0.02  # accuracy change over the data below which the fit is called flat
CHANCE_MARGIN = 0.02  # accuracies within this of chance carry no signal
MIN_POINTS = 5
LOSS_TEXT = {
    "gold_bpb": "gold_bpb (bits per byte of the gold continuation)",
    "gold_nats": "gold_nats (nats per token of the gold continuation)",
    "val_loss": "val_loss (the run's validation loss, nats per token)",
}


@dataclass(frozen=True)
class SigmoidAccuracy:
    # floats, or arrays of bootstrap draws (one curve per element: scaling.fits.accuracy_prediction)
    a: float | np.ndarray
    b: float | np.ndarray
    k: float | np.ndarray
    L0: float | np.ndarray

    def predict(self, L):
        L = np.asarray(L, dtype=float)
        with np.errstate(over="ignore"):
            return self.a / (1.0 + np.exp(-self.k * (L - self.L0))) + self.b


def _curve(q) -> SigmoidAccuracy:
    """The sigmoid of the fitted parametrisation q = (f, b, k, L0), a = f (1 - b): with f, b in
    [0, 1] the ceiling a + b = b + f (1 - b) never exceeds 1."""
    f, b, k, L0 = q
    return SigmoidAccuracy(f * (1.0 - b), b, k, L0)


def _jac(q, L: np.ndarray) -> np.ndarray:
    """d prediction / d (f, b, k, L0): analytic, so each least-squares run needs no finite differences."""
    f, b, k, L0 = q
    a = f * (1.0 - b)
    with np.errstate(over="ignore"):
        s = 1.0 / (1.0 + np.exp(-k * (L - L0)))
    ds = s * (1.0 - s)
    return np.column_stack([(1.0 - b) * s, 1.0 - f * s, a * ds * (L - L0), -a * ds * k])


def _fit_one(L: np.ndarray, acc: np.ndarray, warm=None) -> tuple[dict, float]:
    """Least squares from a 3 x 3 grid of slopes and mid-points; a bootstrap resample starts from
    `warm` (the full-data optimum's a, b, k, L0) and the grid's centre only. The lowest cost wins."""
    from scipy.optimize import least_squares  # deferred: scipy.optimize is slow to import

    span = max(float(np.ptp(L)), 1e-6)
    b0 = float(np.clip(acc.min(), 0.0, 0.99))
    starts = [] if warm is None else [[warm[0] / max(1.0 - warm[1], 1e-9), *warm[1:]]]
    for k0 in (-1.0, -4.0, -16.0) if warm is None else (-4.0,):
        for L00 in np.percentile(L, (25, 50, 75) if warm is None else (50,)):
            starts.append([max(float(np.ptp(acc)), 0.05) / (1.0 - b0), b0, k0 / span, float(L00)])
    best = None
    lo, hi = np.array([1e-6, 0.0, -np.inf, -np.inf]), np.array([1.0, 1.0, -1e-9, np.inf])
    for x0 in starts:
        try:
            res = least_squares(
                lambda q: _curve(q).predict(L) - acc,
                np.clip(x0, lo + 1e-12, hi - 1e-12),
                jac=lambda q: _jac(q, L),
                bounds=(lo, hi),
                x_scale="jac",
            )
        except ValueError:
            continue
        if best is None or res.cost < best.cost:
            best = res
    if best is None or not np.all(np.isfinite(best.x)):
        raise FitError("no start of the sigmoid fit converged")
    c = _curve(best.x)
    return {"a": float(c.a), "b": float(c.b), "k": float(c.k), "L0": float(c.L0)}, float(2 * best.cost)


def fit_task(L, acc, *, bootstrap: int = 0, seed: int = 0, ci: float = 0.95, chance: float | None = None) -> dict:
    """One task's fit: {params, intervals, objective, n_points, warnings, loss_range}."""
    L, acc = np.asarray(L, float), np.asarray(acc, float)
    if L.size < MIN_POINTS:
        raise InputError(f"needs at least {MIN_POINTS} (loss, accuracy) points (got {L.size})")
    if not (np.all(np.isfinite(L)) and np.all(np.isfinite(acc))):
        raise InputError("loss and accuracy must be finite numbers (NaN or inf found)")
    if np.any(acc < 0) or np.any(acc > 1):
        raise InputError("accuracies must lie in [0, 1] (give fractions, not percentages)")
    params, sse = _fit_one(L, acc)
    warnings = []
    if chance is not None and np.all(acc <= chance + CHANCE_MARGIN):
        warnings.append(
            f"every accuracy is within {CHANCE_MARGIN} of chance ({chance:g}): no signal, the fit says nothing"
        )
    fitted = SigmoidAccuracy(**params).predict(np.array([L.min(), L.max()]))
    if abs(fitted[0] - fitted[1]) < FLAT_DELTA:
        warnings.append(
            f"the fit is flat: predicted accuracy changes by {abs(fitted[0] - fitted[1]):.3g} over the losses "
            f"{L.min():.4g}-{L.max():.4g}; a, k, L0 are not identified"
        )
    elif not L.min() <= params["L0"] <= L.max():
        warnings.append(
            f"the mid-point L0 = {params['L0']:.4g} lies outside the losses {L.min():.4g}-{L.max():.4g}: "
            "only one tail of the sigmoid was seen, a and b are poorly identified"
        )
    out = {
        "params": params,
        "intervals": {},
        "objective": sse,
        "n_points": int(L.size),
        "warnings": warnings,
        "loss_range": [float(L.min()), float(L.max())],
        "residual_rms": float(np.sqrt(sse / L.size)),
        "residuals": [float(r) for r in acc - SigmoidAccuracy(**params).predict(L)],
    }
    if chance is not None:
        out["chance"] = chance
    if bootstrap:
        reasons: dict[str, int] = {}
        x_full = [params[k] for k in ("a", "b", "k", "L0")]
        samples, failed = run_bootstrap(
            lambda idx: _fit_one(L[idx], acc[idx], x_full)[0], resample_indices(L.size, bootstrap, seed), reasons
        )
        out["intervals"] = percentile_intervals(samples, ci)
        out["bootstrap"] = {"n": bootstrap, "failed": failed, "samples": samples}
        if failed:
            warnings.append(f"{failed} of {bootstrap} bootstrap resamples failed ({'; '.join(reasons)})")
    return out


def load_table(source, columns: dict[str, str], optional: tuple[str, ...] = ("task",)):
    """(DataFrame with loss, acc[, task], description) from a table: CSV, TSV or Parquet; the
    `optional` roles may be missing (`scalelab predict` reads tables without a measured accuracy)."""
    import pandas as pd  # deferred: pandas is slow to import

    for role in columns:
        if role not in ROLES:
            raise InputError(f"--col {role}=...: unknown role '{role}' (roles: {', '.join(ROLES)})")
    if isinstance(source, pd.DataFrame):
        raw, desc = source.copy(), "DataFrame"
    else:
        raw, desc = read_table(source), str(source)
    out = pd.DataFrame()
    for role in ROLES:
        col = columns.get(role, role)
        if col in raw.columns:
            out[role] = raw[col]
        elif role not in optional:
            raise InputError(
                f"column '{col}' for {role} not found (columns: "
                f"{', '.join(map(str, raw.columns))}; map one with --col {role}=NAME)"
            )
    for role in ("loss", "acc"):
        if role in out.columns:
            out[role] = pd.to_numeric(out[role], errors="coerce")
    if "chance" in raw.columns:  # each row's chance accuracy (as run directories state it)
        out["chance"] = pd.to_numeric(raw["chance"], errors="coerce")
    return out, desc


def load_runs(root, *, loss_metric: str, acc_metric: str, steps: str, tasks: list[str] | None):
    """(DataFrame with loss, acc, task, chance, description, warnings) from a run-directory tree."""
    df, warnings = read_eval_points(root, steps=steps, loss_metric=loss_metric, acc_metric=acc_metric, tasks=tasks)
    no_acc = sorted(set(df.loc[df["acc"].isna(), "task"]))
    if no_acc:
        warnings.append(f"task(s) without an accuracy left out: {', '.join(no_acc)}")
    df = df[df["acc"].notna()].reset_index(drop=True)
    if df.empty:
        raise InputError(f"{root}: no evaluated task has both a loss and an accuracy")
    norm = sorted(set(df.loc[df["acc_metric"] != acc_metric, "task"]))
    if acc_metric != "acc" and norm:
        warnings.append(f"task(s) reporting no {acc_metric}, fitted on acc: {', '.join(norm)}")
    return df, str(root), warnings


def fit_accuracy(
    data,
    *,
    columns: dict[str, str] | None = None,
    bootstrap: int = 0,
    seed: int = 0,
    ci: float = 0.95,
    chance: float | None = None,
    loss_metric: str = "bpb",
    acc_metric: str = "acc",
    steps: str = "last",
    tasks: list[str] | None = None,
):
    """Fit Acc(L) per task. One task: params a, b, k, L0 at the top of the record; several (a task
    column, or a run-directory tree): `tasks: {name: {params, intervals, ...}}`, top-level params empty.

    `loss_metric` (bpb | nats | val_loss) says what L is: read so from run directories, declared
    for a table. `chance` overrides each task's chance accuracy (run directories know it)."""
    metric = check_options(loss_metric, acc_metric, steps)
    if chance is not None and not 0 <= chance < 1:
        raise InputError(f"--chance must be in [0, 1) (got {chance})")
    if bootstrap < 0 or not 0 < ci < 1:
        raise InputError(f"--bootstrap must be >= 0 and --ci in (0, 1) (got {bootstrap}, {ci})")
    tasks = parse_tasks(tasks)
    warnings: list[str] = []
    if isinstance(data, (str, Path)) and Path(data).is_dir():
        df, desc, warnings = load_runs(data, loss_metric=loss_metric, acc_metric=acc_metric, steps=steps, tasks=tasks)
        kind = "run directories"
    else:
        df, desc = load_table(data, dict(columns or {}))
        kind = "table"
        if tasks is not None and "task" in df.columns:
            df = df[df["task"].astype(str).isin(tasks)]
    groups = [(str(t), g) for t, g in df.groupby("task", sort=True)] if "task" in df.columns else [(None, df)]
    fits = {}
    for name, g in groups:
        c = chance if chance is not None else _data_chance(g)
        try:
            fits[name] = fit_task(
                g["loss"].to_numpy(), g["acc"].to_numpy(), bootstrap=bootstrap, seed=seed, ci=ci, chance=c
            )
        except InputError as exc:
            raise InputError(f"task {name}: {exc}" if name else str(exc)) from None
    single = fits[groups[0][0]] if len(fits) == 1 else None
    warnings += [f"{t}: {w}" if t else w for t, r in fits.items() for w in r["warnings"]]
    fields = {
        "law": "accuracy",
        "approach": None,
        "form": "Acc(L) = a / (1 + exp(-k (L - L0))) + b",
        "params": single["params"] if single else {},
        "intervals": single["intervals"] if single else {},
        "objective": single["objective"] if single else float(sum(r["objective"] for r in fits.values())),
        "n_points": int(len(df)),
        "warnings": warnings,
        "data_sha256": data_sha256(df, ["loss", "acc"]),
        "source": desc,
        "settings": {
            "bootstrap": bootstrap,
            "seed": seed,
            "ci": ci,
            "chance": chance,
            "columns": dict(columns or {}),
            "data": kind,
            "loss_metric": metric,
            "acc_metric": acc_metric,
            "steps": steps if kind != "table" else None,
            "tasks": tasks,
        },
    }
    if single:
        fields.update({k: single[k] for k in ("loss_range", "residual_rms", "residuals", "chance") if k in single})
        if "bootstrap" in single:
            fields["bootstrap"] = single["bootstrap"]
    if len(fits) > 1 or groups[0][0] is not None:
        fields["tasks"] = fits
    return make_record(**fields)


def _data_chance(g) -> float | None:
    """The task's chance accuracy stated by its evaluations (mean 1 / choices), if any."""
    if "chance" not in g.columns:
        return None
    c = g["chance"].dropna()
    return float(c.mean()) if len(c) else None


def summary(rec) -> str:
    st = rec.get("settings") or {}
    lines = [
        f"law: accuracy  {rec['form']}",
        f"L = {LOSS_TEXT.get(metric, metric) if (metric := st.get('loss_metric')) else 'the loss column'}, "
        f"accuracy = {st.get('acc_metric') or 'acc'}"
        + (
            f" ({st['steps']} evaluated step of each run)"
            if st.get("steps") == "last"
            else " (every evaluated step)"
            if st.get("steps") == "all"
            else ""
        ),
        f"points: {rec['n_points']}",
    ]
    per = rec.get("tasks") or {None: rec}
    for name, r in per.items():
        ivs = r.get("intervals") or {}
        head = f"task {name}: " if name else ""
        parts = []
        for k in ("a", "b", "k", "L0"):
            v = r["params"][k]
            iv = ivs.get(k)
            parts.append(f"{k} = {v:.4g}" + (f" [{iv[0]:.4g}, {iv[1]:.4g}]" if iv else ""))
        ch = f", chance {r['chance']:.3g}" if r.get("chance") is not None else ""
        lines.append(
            f"  {head}{', '.join(parts)}  ({r['n_points']} points, rms {r.get('residual_rms', float('nan')):.3g}{ch})"
        )
    for w in rec.get("warnings", []):
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def predict_accuracy(rec, loss: float, *, task: str | None = None, ci: float = 0.95) -> dict:
    """Accuracy at task loss `loss` from an accuracy record (one task, or `task` of several):
    {accuracy, interval (percentiles over the bootstrap curves, None without them), task}."""
    per = rec.get("tasks") or {}
    if per:
        if task is None and len(per) == 1:
            task = next(iter(per))
        if task not in per:
            raise InputError(f"task {task!r} is not in this accuracy fit (tasks: {', '.join(per)})")
        r = per[task]
    else:
        r = rec
    point = float(SigmoidAccuracy(**{k: r["params"][k] for k in ("a", "b", "k", "L0")}).predict(loss))
    s = (r.get("bootstrap") or {}).get("samples") or {}
    interval = None
    if all(k in s for k in ("a", "b", "k", "L0")):
        draws = SigmoidAccuracy(*(np.asarray(s[k], float) for k in ("a", "b", "k", "L0"))).predict(loss)
        interval = bootstrap_interval(draws, ci)
    return {
        "task": task,
        "loss": float(loss),
        "accuracy": point,
        "interval": interval,
        "interval_kind": "bootstrap of the sigmoid's parameters (the curve's uncertainty, not a single run's scatter)",
    }
