"""`scalelab study next`: the runs that would most shrink a Chinchilla law's uncertainty at a target
budget, per FLOP (scaling.planning.information's greedy design), as rows and as a sweep spec.

Targets: log N_opt and log L_opt (the loss at the optimum) at the target compute, both under the
closed-form optimum of the law (6 N D of the law's N, the budget converted at the plan's optimum):
the quantities the plan's verdict judges. The state of knowledge is the fit's bootstrap covariance of
θ = (log A, log B, log E, α, β): the record carries its resamples, not its runs, and the
resamples already say which directions the runs pin down (a parameter that ran to its bound, a
non-identified exponent). A new run at (N, D) adds the Fisher information of one observation of
log L with the fit's residual scatter σ. Gradients are taken at up to DRAWS bootstrap laws and the
criterion averaged over them (a law whose point estimate is not identified would otherwise design for
one arbitrary optimum). The Fisher criterion is the fast screen that picks the runs (one closed-form
update per candidate); it is linearised and overconfident where the law is not identified.

The forecast printed for the chosen runs is a refit (scaling.planning.forecast.preposterior): their
losses simulated from the fit's bootstrap laws plus its residuals, the law refitted and bootstrapped as
the fit is, FORECAST_DRAWS futures of FORECAST_RESAMPLES resamples. It needs the runs the record was
fitted on (the record's source, or `runs`); without them, or for a fit it cannot repeat (MLE, training
curves, a holdout), the Fisher forecast is printed and the notes say why. `screen="refit"` (--screen
refit) lets refit forecasts choose among a few batches instead (scaling.planning.screen).
Predicted intervals after the runs keep today's bootstrap interval's centre (the point estimate, in
log) and scale its log half-widths by the forecast's width ratio.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from scaling.core.conventions import TokenCost, conventions_of
from scaling.core.errors import InputError
from scaling.laws.allocation import search_range
from scaling.planning import constrained_design as cd
from scaling.planning.information import Design, greedy, target_variance, update
from scaling.planning.plan import make_plan
from scaling.planning.run_choice import EPOCHS_WARN, designed_candidate

DRAWS = 64
FORECAST_DRAWS = 4  # simulated futures of the refit forecast (--forecast-draws; 0: the Fisher forecast only)
FORECAST_RESAMPLES = 20  # bootstrap resamples of each future's refit (at most the record's own)
NO_OPTIMUM_NOTE = 0.10  # a share of laws without an optimum in range above which the forecast says so
FAMILY_SIZES = 16
BELOW_FITTED = 4.0  # the family grid starts this factor below the smallest fitted size (small runs are cheap)
TOKENS_PER_PARAM = (2.0, 500.0)
TOKENS_PER_PARAM_STEPS = 10
MIN_BOOTSTRAP = 10
# --target: the weights of (log N_opt, log L_opt) in the criterion. "both" (the default) is the issue's
# question, the plan's two intervals; "n-opt" designs for the model size alone (what a run needs chosen
# before it starts), "loss" for the predicted loss alone (what a study forecasts).
TARGETS = {"both": (1.0, 1.0), "n-opt": (1.0, 0.0), "loss": (0.0, 1.0)}
# --screen: what chooses the runs. "fisher" (the default): the greedy Fisher design alone; "refit": a few
# batches (the Fisher greedy's for each target, an IsoFLOP-like one) forecast by refits, the best per FLOP
# (scaling.planning.screen), each with --forecast-draws simulated futures (SCREEN_DRAWS where that is 0).
SCREENS = ("fisher", "refit")
# --max-epochs' default for a data-constrained law: up to this many times the target optimum's epochs
# (when more than EPOCHS_WARN). Measured on a synthetic truth whose target repeats its data ~6 times
# (docs/scaling-laws.md, 9 seeds): with the 4-epoch cap the design stalled after one round (1.2-1.9 of an
# IsoFLOP ladder's FLOPs to each N_opt width); with the target bracketed it needs 0.5-0.8 of them.
DC_EPOCHS_OVER_TARGET = 2.0
SCREEN_DRAWS = 4


@dataclass
class Proposal:
    """The chosen runs (`rows`: N, D, flops, tokens_per_param, model and the menu's row), their cost,
    today's intervals at the target and the forecast after them, and what the reader has to know."""

    target: float
    budget: float
    rows: list[dict]
    spent: float
    today: dict
    after: dict
    steps: list[float]
    candidates: int
    conventions: dict
    notes: list[str] = field(default_factory=list)
    target_of: str = "both"
    screen: str = "fisher"

    def as_dict(self) -> dict:
        return {
            "target_compute": self.target,
            "budget_flops": self.budget,
            "spent_flops": self.spent,
            "n_candidates": self.candidates,
            "conventions": self.conventions,
            "runs": [{k: v for k, v in r.items() if k != "row"} for r in self.rows],
            "today": self.today,
            "after": self.after,
            "criterion_steps": self.steps,
            "criterion": CRITERIA[self.target_of],
            "target": self.target_of,
            "screen": self.screen,
            "forecast_method": (self.after.get("forecast") or {}).get("method"),
            "notes": self.notes,
        }


CRITERIA = {
    "both": "mean over bootstrap laws of Var(log N_opt)/today + Var(log L_opt)/today at the target "
    "(Fisher update of the bootstrap covariance; greedy per FLOP)",
    "n-opt": "mean over bootstrap laws of Var(log N_opt)/today at the target "
    "(Fisher update of the bootstrap covariance; greedy per FLOP)",
    "loss": "mean over bootstrap laws of Var(log L_opt)/today at the target "
    "(Fisher update of the bootstrap covariance; greedy per FLOP)",
}


# ---------------------------------------------------------------- the law in θ = (log A, log B, log E, α, β)
def theta_draws(rec) -> np.ndarray:
    """The record's finite bootstrap laws as rows of θ."""
    s = (rec.get("bootstrap") or {}).get("samples") or {}
    keys = ("A", "B", "E", "alpha", "beta")
    if not all(k in s for k in keys):
        raise InputError(
            "study next needs the fit's bootstrap samples (fit chinchilla --approach 3 --bootstrap 100): "
            "they are its state of knowledge"
        )
    n = min(len(s[k]) for k in keys)
    arr = np.array([[np.nan if v is None else v for v in s[k][:n]] for k in keys], dtype=float).T
    with np.errstate(all="ignore"):
        th = np.column_stack([np.log(arr[:, 0]), np.log(arr[:, 1]), np.log(arr[:, 2]), arr[:, 3], arr[:, 4]])
    th = th[np.all(np.isfinite(th), axis=1)]
    if len(th) < MIN_BOOTSTRAP:
        raise InputError(f"study next: the fit has {len(th)} usable bootstrap laws (need >= {MIN_BOOTSTRAP})")
    return th


def theta_of(params: dict) -> np.ndarray:
    return np.array(
        [np.log(params["A"]), np.log(params["B"]), np.log(params["E"]), params["alpha"], params["beta"]], dtype=float
    )


def log_loss_grad(th: np.ndarray, N, D) -> np.ndarray:
    """∂ log L(N, D) / ∂θ: th (S, 5), N, D (M,) -> (S, M, 5) (softmax weights of the log-sum-exp)."""
    lN, lD = np.log(np.asarray(N, float))[None, :], np.log(np.asarray(D, float))[None, :]
    shape = (th.shape[0], lN.shape[1])
    t = np.stack(
        [th[:, :1] - th[:, 3:4] * lN, th[:, 1:2] - th[:, 4:5] * lD, np.broadcast_to(th[:, 2:3], shape)], axis=-1
    )
    w = np.exp(t - t.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return np.stack([w[..., 0], w[..., 1], w[..., 2], -w[..., 0] * lN, -w[..., 1] * lD], axis=-1)


def targets(th: np.ndarray, C6: float) -> np.ndarray:
    """(log N_opt, log L_opt) at compute C6 = 6 N D (closed form): th (S, 5) -> (S, 2)."""
    la, lb, le, al, be = th.T
    with np.errstate(all="ignore"):
        logG = (np.log(al) + la - np.log(be) - lb) / (al + be)
        x = np.log(C6 / 6.0)
        lN = logG + be / (al + be) * x
        lD = al / (al + be) * x - logG
        lL = np.logaddexp(np.logaddexp(la - al * lN, lb - be * lD), le)
    return np.column_stack([lN, lL])


def target_grad(th: np.ndarray, C6: float, h: float = 1e-5) -> np.ndarray:
    """∂(log N_opt, log L_opt)/∂θ by central differences: (S, 2, 5)."""
    out = np.empty((th.shape[0], 2, th.shape[1]))
    for k in range(th.shape[1]):
        e = np.zeros(th.shape[1])
        e[k] = h
        out[:, :, k] = (targets(th + e, C6) - targets(th - e, C6)) / (2 * h)
    return out


def residual_sigma(rec) -> float:
    d = rec.get("diagnostics") or {}
    r = d.get("residuals_log")
    if r:
        return float(np.sqrt(np.mean(np.square(r))))
    if d.get("residual_log_rms"):
        return float(d["residual_log_rms"])
    raise InputError("study next: the fit record states no residual scatter (diagnostics.residuals_log)")


# ---------------------------------------------------------------- candidates
def family_candidates(ch, plan: Mapping[str, Any], budget: float, cost: TokenCost, conv: dict) -> list[dict]:
    """Runs on the study's own model family (the plan's shape rule): FAMILY_SIZES models from
    BELOW_FITTED below the smallest fitted size to what the budget or the target's N_opt interval
    reaches, each at tokens per parameter spaced evenly in log over TOKENS_PER_PARAM, every run
    affordable within `budget`."""
    rng = ch.get("data_range") or {}
    n_lo = float((rng.get("N") or [plan["N_opt"]])[0]) / BELOW_FITTED
    reach = max((plan.get("N_opt_interval") or [0, plan["N_opt"]])[1], plan["N_opt"]) * 2.0
    n_hi = min(reach, float(np.sqrt(budget / (6.0 * TOKENS_PER_PARAM[0]))))
    n_hi = max(n_hi, n_lo * 2.0)
    recipe = ch.get("recipe") or {}
    seq_len = (recipe.get("settings") or {}).get("model.seq_len")
    seen, out = set(), []
    for n in np.geomspace(n_lo, n_hi, FAMILY_SIZES):
        try:
            m = designed_candidate(ch, float(n), conv, plan["vocab_size"], seq_len, None, [])
        except InputError:
            continue
        N = float(m["non_embedding"] if conv["n_kind"] == "non_embedding" else m["total"])
        if round(N) in seen:
            continue
        seen.add(round(N))
        for r in np.geomspace(*TOKENS_PER_PARAM, TOKENS_PER_PARAM_STEPS):
            D = float(round(r * N))
            if float(cost(N)) * D <= budget:
                out.append({"N": N, "D": D, "model": m["model"], "shape_rule": m["shape_rule"]})
    return out


def table_candidates(path: str, conv: dict) -> tuple[list[dict], object]:
    """The rows of a csv/json menu: N (or the record's parameter column) and D (or tokens) per row."""
    import pandas as pd  # deferred: pandas is slow to import

    p = Path(path)
    if not p.exists():
        raise InputError(f"--candidates {path}: no such file")
    if p.suffix == ".json":
        df = pd.read_json(p)
    elif p.suffix in (".csv", ".tsv"):
        df = pd.read_csv(p, sep="\t" if p.suffix == ".tsv" else ",")
    else:
        raise InputError(f"--candidates {path}: a .csv, .tsv or .json table (got {p.suffix or 'no suffix'})")
    n_col = next(
        (c for c in ("N", "non_embedding_params" if conv["n_kind"] == "non_embedding" else "params") if c in df), None
    )
    d_col = next((c for c in ("D", "tokens") if c in df), None)
    if n_col is None or d_col is None:
        raise InputError(
            f"--candidates {path}: needs a column N (or "
            f"{'non_embedding_params' if conv['n_kind'] == 'non_embedding' else 'params'}) and a column D (or tokens) "
            f"in the fit's conventions; found {', '.join(map(str, df.columns))}"
        )
    N, D = df[n_col].to_numpy(float), df[d_col].to_numpy(float)
    bad = ~(np.isfinite(N) & np.isfinite(D) & (N > 0) & (D > 0))
    if bad.any():
        raise InputError(f"--candidates {path}: row {int(np.argmax(bad))} has no positive {n_col} and {d_col}")
    rows = [{"N": float(n), "D": float(d), "row": i} for i, (n, d) in enumerate(zip(N, D))]
    return rows, df


def write_rows(path: str, table, rows: list[int], out: str | Path) -> Path:
    """The chosen rows of the menu as they are: a csv/tsv menu's own text fields (no number reformatted),
    a json menu's records through pandas."""
    import csv  # deferred

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    p = Path(path)
    if p.suffix in (".csv", ".tsv"):
        sep = "\t" if p.suffix == ".tsv" else ","
        with p.open(newline="") as f:
            reader = csv.reader(f, delimiter=sep)
            header = next(reader)
            body = [r for r in reader if r]
        with out.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(header)
            w.writerows(body[i] for i in rows)
    else:
        table.iloc[rows].to_csv(out, index=False)
    return out


# ---------------------------------------------------------------- the refit forecast
def _refit_blocker(rec) -> str | None:
    """Why the refit forecast cannot repeat this record's fit (None: it can)."""
    st = rec.get("settings") or {}  # approach 3 and the data-constrained law are refitted (forecast.py)
    if st.get("objective", "huber") != "huber":
        return f"the {st.get('objective')} objective is not refitted here"
    if st.get("curves"):
        return "a fit on training curves resamples whole runs, which the refit does not repeat"
    if st.get("holdout"):
        return "a fit with a holdout"
    if not (rec.get("diagnostics") or {}).get("residuals_log"):
        return "the record keeps no residuals"
    return None


def fitted_points(rec, runs=None):
    """(the fitted runs' N, D, loss as a DataFrame, None), or (None, why not): `runs` or the record's
    source, read in its conventions with its drops, checked against its data_sha256."""
    from scaling.core.conventions import drop_embedding_dominated  # deferred: pandas
    from scaling.core.selection import drop_highest
    from scaling.data import inputs
    from scaling.fits.record import data_sha256

    src = runs if runs is not None else rec.get("source")
    if src is None or (not hasattr(src, "columns") and not Path(str(src)).exists()):
        return None, f"the fitted runs ({src or 'no source'}) are not here: give them with --runs"
    st = rec.get("settings") or {}
    n_kind = (rec.get("conventions") or {}).get("n_kind") or rec.get("n_kind") or "total"
    try:
        cols = rec.get("columns") if runs is None else None
        df = inputs.load(src, cols or None, n_kind).df
        df, _ = drop_embedding_dominated(df, st.get("max_embedding_fraction"))
        df = drop_highest(df, int(st.get("drop_highest") or 0))
    except InputError as exc:
        return None, f"the fitted runs could not be read: {exc}"
    cols = ["N", "D", "loss"] + (["U"] if st.get("law") == "data-constrained" else [])
    if st.get("law") == "data-constrained" and "U" not in df:
        return None, "the fitted runs state no unique tokens (column U)"
    if rec.get("data_sha256") and data_sha256(df, cols) != rec["data_sha256"]:
        return None, f"the runs at {src} are not the ones the record was fitted on (data_sha256 differs)"
    return df, None


def forecast_setup(rec, pts, C6: float, N_range, unique: float | None = None):
    """What scaling.planning.forecast.preposterior needs for this record's fit: (model, X_old, y_old,
    x_of(N, D) -> X of new runs, draws, point, residuals). Approach 3 or, with `unique`, the
    data-constrained law (new runs draw from `unique` tokens, the fitted ones from their own U); the
    fit's bootstrap laws as the futures' truths, its residuals as their noise, its Huber delta, the
    plan's search range over `N_range` (today's runs and the proposed ones)."""
    from scaling.fits.chinchilla.huber_fit import DELTA
    from scaling.planning.forecast import chinchilla_model, data_constrained_model

    st = rec.get("settings") or {}
    delta = float(st.get("delta") or DELTA)
    N_old, D_old = pts["N"].to_numpy(float), pts["D"].to_numpy(float)
    n_range = search_range(np.concatenate([N_old, np.asarray(N_range, float)]))
    y_old = np.log(pts["loss"].to_numpy(float))
    residuals = -np.asarray(rec["diagnostics"]["residuals_log"], float)  # the record's are fit - observed
    if unique:
        keys = cd.keys_of(rec)
        U_old = np.minimum(pts["U"].to_numpy(float), D_old)
        X_old = np.column_stack([np.log(N_old), np.log(D_old), np.log(U_old)])

        def x_of(N, D):
            D = np.asarray(D, float)
            return np.column_stack([np.log(N), np.log(D), np.log(np.minimum(D, unique))])

        draws, point = cd.theta_draws(rec, MIN_BOOTSTRAP), cd.theta_of(rec)
        model = data_constrained_model(C6, delta, n_range, unique, keys)
    else:
        X_old = np.column_stack([np.log(N_old), np.log(D_old)])

        def x_of(N, D):
            return np.column_stack([np.log(N), np.log(D)])

        draws, point = theta_draws(rec), theta_of(rec["params"])
        model = chinchilla_model(C6, delta, n_range)
    return model, X_old, y_old, x_of, draws, point, residuals


def refit_forecast(rec, pts, N_new, D_new, C6: float, draws: int, resamples: int, ci: float, unique=None):
    """scaling.planning.forecast.preposterior of the runs (N_new, D_new) for this record's fit (forecast_setup)."""
    from scaling.planning.forecast import preposterior

    model, X_old, y_old, x_of, th, point, residuals = forecast_setup(rec, pts, C6, N_new, unique)
    return preposterior(
        model,
        X_old,
        y_old,
        x_of(N_new, D_new),
        th,
        point,
        residuals,
        futures=draws,
        resamples=_resamples(rec, resamples),
        ci=ci,
        seed=_seed(rec),
    )


def _resamples(rec, resamples: int) -> int:
    return min(resamples, int((rec.get("settings") or {}).get("bootstrap") or resamples))


def _seed(rec) -> int:
    return int((rec.get("settings") or {}).get("seed") or 0)


def fisher_design(cov0, F, G, sigma: float, chosen: list[int], flops, weights) -> Design:
    """The Fisher update of a given batch (in its order), as `greedy` reports its own picks."""
    S, _, P = F.shape
    cov = np.broadcast_to(cov0, (S, P, P)).copy()
    before = target_variance(cov, G)
    base = np.where(before > 0, before, np.nan)
    w = np.asarray(weights, float)
    steps = []
    for m in chosen:
        cov = update(cov, F[:, m, :], sigma)
        with np.errstate(all="ignore"):
            steps.append(float(np.nansum(np.nanmean(target_variance(cov, G) / base, axis=0) * w) / w.sum()))
    return Design(list(chosen), float(np.sum(np.asarray(flops)[chosen])), before, target_variance(cov, G), steps)


# ---------------------------------------------------------------- the proposal
def propose(
    fits: list,
    target: float,
    *,
    budget: float,
    max_runs: int = 8,
    candidates: list[dict] | None = None,
    ci: float = 0.95,
    runs=None,
    forecast_draws: int = FORECAST_DRAWS,
    forecast_resamples: int = FORECAST_RESAMPLES,
    unique_tokens: float | None = None,
    target_of: str = "both",
    screen: str = "fisher",
    max_epochs: float | None = None,
) -> Proposal:
    """The next runs for `target` FLOPs from the fit records (one chinchilla approach-3 record;
    others as `scalelab plan` takes them), within `budget` FLOPs and `max_runs` runs;
    `candidates`: a menu (table_candidates), else the model family's grid. `runs`: the runs the
    record was fitted on (a table, run tree or DataFrame; default the record's source), for the refit
    forecast of `forecast_draws` futures (0: the Fisher forecast only). A data-constrained record
    designs with its own law for `unique_tokens` (default: the fitted runs' data set). `target_of`:
    which intervals the runs should shrink (TARGETS: both, n-opt, loss); both are forecast either way.
    `max_epochs`: leave out candidates repeating the fitted runs' unique tokens more often (default
    EPOCHS_WARN; a data-constrained law: DC_EPOCHS_OVER_TARGET x its target optimum's epochs if more)."""
    if target_of not in TARGETS:
        raise InputError(f"--target must be one of {', '.join(TARGETS)} (got {target_of!r})")
    if screen not in SCREENS:
        raise InputError(f"--screen must be one of {', '.join(SCREENS)} (got {screen!r})")
    if not (budget > 0 and np.isfinite(budget)):
        raise InputError(f"--budget-flops must be a positive number of FLOPs (got {budget})")
    if max_runs < 1:
        raise InputError(f"--max-runs must be >= 1 (got {max_runs})")
    if max_epochs is not None and not (np.isfinite(max_epochs) and max_epochs > 0):
        raise InputError(f"--max-epochs must be a positive number of epochs (got {max_epochs})")
    if forecast_draws < 0 or (forecast_draws and forecast_resamples < 10):
        raise InputError(
            f"--forecast-draws must be >= 0 (got {forecast_draws}) with >= 10 resamples (got {forecast_resamples})"
        )
    ch = next((f for f in fits if f["law"] == "chinchilla" and f.get("approach") == 3), None)
    if ch is None:
        raise InputError(
            "study next designs for a Chinchilla approach-3 law: give its fit record "
            "(scalelab fit chinchilla --approach 3 --bootstrap 100)"
        )
    notes = []
    dc = (ch.get("settings") or {}).get("law") == "data-constrained"
    unique = (unique_tokens or (ch.get("data") or {}).get("unique_tokens")) if dc else None
    if unique_tokens is not None and not dc:
        raise InputError(
            "--unique-tokens is used by a data-constrained law only (fit --law data-constrained): "
            "this chinchilla law assumes unlimited unique data"
        )
    if dc and not unique:
        raise InputError(
            "study next: a data-constrained law designs for a number of unique tokens and the fitted runs do not "
            "share one data set: give --unique-tokens"
        )
    plan = make_plan(fits, target, ci=ci, unique_tokens=unique_tokens if dc else None)
    conv = conventions_of(ch)
    cost = TokenCost.from_record(ch) if ch.get("conventions") else TokenCost(conv["compute"], conv["n_kind"])
    th_all = cd.theta_draws(ch, MIN_BOOTSTRAP) if dc else theta_draws(ch)
    cov0 = np.cov(th_all.T)
    idx = np.unique(np.linspace(0, len(th_all) - 1, min(DRAWS, len(th_all))).round().astype(int))
    th = th_all[idx]
    # the budget as 6 N D of the law's N (the closed-form optimum's convention), at the plan's optimum
    C6 = target * 6.0 * plan["N_opt"] / float(cost(plan["N_opt"]))
    cands = candidates if candidates is not None else family_candidates(ch, plan, budget, cost, conv)
    if not dc:
        unique = (ch.get("data") or {}).get("unique_tokens")
    if max_epochs is not None and not unique:
        raise InputError("--max-epochs caps repeats of the fitted runs' unique tokens, and the fit record states none")
    cap, why = (EPOCHS_WARN, "") if max_epochs is None else (max_epochs, " (--max-epochs)")
    if max_epochs is None and dc and unique and np.isfinite(plan.get("D_opt") or np.nan):
        # bracket the target: runs may repeat the data up to twice as often as its optimum will (the law's
        # repetition term is then measured on both sides of where it is used, not extrapolated from 4 epochs)
        bracket = DC_EPOCHS_OVER_TARGET * float(plan["D_opt"]) / unique
        if bracket > EPOCHS_WARN:
            cap, why = bracket, f" ({DC_EPOCHS_OVER_TARGET:g}x the epochs of the optimum at the target; --max-epochs)"
    if unique:  # a run repeating the fits' data much more than the target does measures memorisation
        many = [c for c in cands if c["D"] > cap * unique]
        if many:
            cands = [c for c in cands if c["D"] <= cap * unique]
            notes.append(
                f"left out {len(many)} candidate(s) with more than {cap:.3g} epochs of the fitted runs' "
                f"{unique:.3g} unique tokens{why}"
            )
    if not cands:
        raise InputError(f"study next: no candidate run fits within --budget-flops {budget:.3g}")
    N = np.array([c["N"] for c in cands])
    D = np.array([c["D"] for c in cands])
    flops = cost(N) * D
    if dc and unique:  # the law's own parameters and its optimum with `unique` tokens (runs draw U = min(D, unique))
        keys = cd.keys_of(ch)
        n_range = search_range(np.asarray((ch.get("data_range") or {}).get("N") or [plan["N_opt"]], float))
        F = cd.log_loss_grad(th, keys, N, D, unique)
        G = cd.target_grad(th, keys, C6, unique, n_range)
        notes.append(f"a data-constrained law: designed for its optimum with {unique:.3g} unique tokens")
    else:
        F = log_loss_grad(th, N, D)
        G = target_grad(th, C6)
    weights = np.array(TARGETS[target_of])
    t0 = time.perf_counter()
    sigma = residual_sigma(ch)
    d = greedy(cov0, F, G, flops, sigma=sigma, budget=budget, max_runs=max_runs, weights=weights)
    if not d.chosen:
        raise InputError(
            f"study next: no candidate within --budget-flops {budget:.3g} adds information at {target:.3g} FLOPs"
        )
    why_not = _refit_blocker(ch) if (forecast_draws or screen == "refit") else "--forecast-draws 0"
    pts = None
    if why_not is None:
        pts, why_not = fitted_points(ch, runs)
    fc = None
    if screen == "refit":
        if why_not is not None:
            raise InputError(f"--screen refit refits the law on the fitted runs and cannot here: {why_not}")
        d, fc, screened = _refit_screen(
            ch,
            pts,
            d,
            (cov0, F, G, sigma),
            N,
            D,
            flops,
            C6,
            unique if dc else None,
            budget,
            max_runs,
            target_of,
            forecast_draws or SCREEN_DRAWS,
            forecast_resamples,
            ci,
        )
        best = screened[0]
        others = "; ".join(f"{x.label} x{np.sqrt(x.criterion):.2f} for {x.spent:.3g} FLOPs" for x in screened[1:])
        notes.append(
            f"screen: refit chose the {best.label} batch of {len(screened)} forecast by refits "
            f"({fc.futures} futures of {fc.resamples} resamples each; criterion {TARGET_WORDS[target_of]}, "
            f"x{np.sqrt(best.criterion):.2f} of today's width for {best.spent:.3g} FLOPs"
            + (f"; the others: {others}" if others else "")
            + f"; {time.perf_counter() - t0:.0f} s)"
        )
    else:
        notes.append(f"screen: fisher (the greedy Fisher design chose the runs; {time.perf_counter() - t0:.1f} s)")
    fisher = d.width_ratio()
    ratio, forecast = (
        fisher,
        {"method": "fisher", "width_ratio_fisher": {"N_opt": float(fisher[0]), "loss": float(fisher[1])}},
    )
    if why_not is None and forecast_draws and fc is None:
        fc = refit_forecast(
            ch, pts, N[d.chosen], D[d.chosen], C6, forecast_draws, forecast_resamples, ci, unique if dc else None
        )
    if fc is not None:
        ratio = fc.width_ratio()
        share = {"today": float(fc.undefined_today[0]), "after": float(fc.undefined_after[0])}
        forecast |= {
            "method": "refit",
            "futures": fc.futures,
            "resamples": fc.resamples,
            "seconds": fc.seconds,
            "failed_fits": fc.failed,
            "width_ratio_refit": {"N_opt": float(ratio[0]), "loss": float(ratio[1])},
            "no_optimum_share": share,
        }
        if share["today"] > NO_OPTIMUM_NOTE or share["after"] > NO_OPTIMUM_NOTE:
            notes.append(
                f"forecast: {share['today']:.0%} of today's bootstrap laws and {share['after']:.0%} of the "
                "simulated refits after the runs have no optimum inside the plan's range of N: N_opt's "
                "interval and its forecast speak only for the rest (the runs do not pin the optimum down)"
            )
    else:
        notes.append(f"forecast: the Fisher update, not a refit ({why_not})")
    v = plan.get("verdict") or {}
    today = {
        "N_opt": plan["N_opt"],
        "N_opt_interval": plan.get("N_opt_interval"),
        "loss": plan.get("loss_at_optimum"),
        "loss_interval": plan.get("loss_at_optimum_interval"),
        "verdict": v.get("status"),
    }
    after = {
        "N_opt_interval": _shrink(plan["N_opt"], plan.get("N_opt_interval"), ratio[0]),
        "loss_interval": _shrink(plan.get("loss_at_optimum"), plan.get("loss_at_optimum_interval"), ratio[1]),
        "width_ratio": {"N_opt": float(ratio[0]), "loss": float(ratio[1])},
        "forecast": forecast,
    }
    iv = after["N_opt_interval"]
    span = v.get("max_span", 4.0)
    if iv:
        after["N_opt_span"] = iv[1] / iv[0]
        after["identified"] = bool(after["N_opt_span"] <= span)
    rows = []
    for m in d.chosen:
        c = cands[m]
        rows.append({**c, "flops": float(flops[m]), "tokens_per_param": c["D"] / c["N"], "n_kind": conv["n_kind"]})
    return Proposal(
        target=target,
        budget=budget,
        rows=rows,
        spent=d.spent,
        today=today,
        after=after,
        steps=d.steps,
        candidates=len(cands),
        conventions={"compute": conv["compute"], "n_kind": conv["n_kind"]},
        notes=notes,
        target_of=target_of,
        screen=screen,
    )


def _refit_screen(ch, pts, d, fisher_state, N, D, flops, C6, unique, budget, max_runs, target_of, draws, resamples, ci):
    """--screen refit: the Fisher greedy's batch for `target_of`, its batches for the other targets and an
    IsoFLOP-like batch at the same FLOPs, each forecast by refits (scaling.planning.screen); the best
    forecast per FLOP wins. Returns (its Fisher Design, its refit Forecast, the screened batches best first)."""
    from scaling.planning.screen import isoflop_batch
    from scaling.planning.screen import screen as screen_batches

    cov0, F, G, sigma = fisher_state
    designs = {f"fisher ({target_of})": d}
    for t, w in TARGETS.items():
        if t != target_of:
            designs[f"fisher ({t})"] = greedy(
                cov0, F, G, flops, sigma=sigma, budget=budget, max_runs=max_runs, weights=np.array(w)
            )
    iso, _ = isoflop_batch(N, flops, budget, max_runs)
    if iso:
        designs["isoflop"] = fisher_design(cov0, F, G, sigma, iso, flops, TARGETS[target_of])
    model, X_old, y_old, x_of, th, point, residuals = forecast_setup(ch, pts, C6, N, unique)
    screened = screen_batches(
        model,
        X_old,
        y_old,
        x_of(N, D),
        {k: (v.chosen, v.spent) for k, v in designs.items()},
        th,
        point,
        residuals,
        weights=TARGETS[target_of],
        futures=draws,
        resamples=_resamples(ch, resamples),
        ci=ci,
        seed=_seed(ch),
    )
    if not screened or not np.isfinite(screened[0].score):
        raise InputError("--screen refit: no candidate batch's refit forecast narrows the target's interval")
    return designs[screened[0].label], screened[0].forecast, screened


TARGET_WORDS = {"both": "the N_opt and loss intervals", "n-opt": "N_opt's interval", "loss": "the loss interval"}


def _shrink(point, iv, ratio: float):
    """Today's interval with its log half-widths around the point scaled by `ratio`."""
    if not iv or point is None or not point > 0 or not (iv[0] > 0 and iv[1] > 0):
        return None
    return [float(point * (iv[0] / point) ** ratio), float(point * (iv[1] / point) ** ratio)]


def format_proposal(p: Proposal) -> str:
    def iv(x):
        return f"[{x[0]:.4g}, {x[1]:.4g}]" if x else "–"

    conv = p.conventions
    lines = [
        f"target: {p.target:.4g} FLOPs ({conv['compute']}; N = {conv['n_kind']} parameters); "
        f"verdict today: {p.today.get('verdict')}",
        f"proposed {len(p.rows)} runs, {p.spent:.4g} FLOPs of the {p.budget:.4g} budget "
        f"(chosen from {p.candidates} candidates, most shrinkage of {TARGET_WORDS[p.target_of]} per FLOP first):",
        f"  {'N':>10} {'D':>10} {'D/N':>7} {'FLOPs':>10}  model",
    ]
    for r in p.rows:
        model = r.get("model") or {}
        shape = f"d_model {model['d_model']}, {model['n_layers']} layers" if model.get("d_model") else ""
        where = f"row {r['row']}" if r.get("row") is not None else ""
        lines.append(
            f"  {r['N']:>10.4g} {r['D']:>10.4g} {r['tokens_per_param']:>7.3g} {r['flops']:>10.4g}  {shape or where}"
        )
    a = p.after
    lines += [
        "interval at the target            today                       after the proposed runs (forecast)",
        f"  N_opt {p.today['N_opt']:<12.4g}            {iv(p.today.get('N_opt_interval')):<27} "
        f"{iv(a.get('N_opt_interval'))}  (width x{a['width_ratio']['N_opt']:.2f})",
    ]
    if p.today.get("loss") is not None:
        lines.append(
            f"  loss at the optimum {p.today['loss']:<8.4g}  {iv(p.today.get('loss_interval')):<27} "
            f"{iv(a.get('loss_interval'))}  (width x{a['width_ratio']['loss']:.2f})"
        )
    if "identified" in a:
        lines.append(
            f"  N_opt's interval would span {a['N_opt_span']:.3g}x: "
            + ("identified" if a["identified"] else "still not identified (raise --budget-flops or --max-runs)")
        )
    f = a.get("forecast") or {}
    fw = f.get("width_ratio_fisher") or {}
    if f.get("method") == "refit":
        lines.append(
            f"forecast: refit ({f['futures']} simulated future{'s' if f['futures'] != 1 else ''}: "
            "the runs' losses drawn from the fit's bootstrap laws "
            f"plus its residuals, the law refitted and bootstrapped with {f['resamples']} resamples; "
            f"{f['seconds']:.0f} s); the Fisher update that chose the runs forecast width "
            f"x{fw.get('N_opt', float('nan')):.2f} (N_opt), x{fw.get('loss', float('nan')):.2f} (loss)"
        )
    else:
        lines.append(
            "forecast: Fisher update of the fit's bootstrap covariance, averaged over its bootstrap laws "
            "(linearised: overconfident where the law is not identified); refit after the runs to measure it"
        )
    lines += [f"note: {n}" for n in p.notes]
    return "\n".join(lines)


def sweep_files(p: Proposal, fits: list, spec_path: str | Path, name: str | None = None) -> tuple[Path, Path]:
    """The proposed runs as a sweep (kind zip over model and train.tokens) and its base train config
    (the fits' recipe: `scaling.planning.emit.to_train_config` of the target's plan), side by side."""
    import yaml  # deferred

    from scaling.planning.emit import to_train_config

    if any(not r.get("model") for r in p.rows):
        raise InputError(
            "--sweep: the chosen menu rows name no model shape; use the default candidates "
            "(the study's family) or train the rows of --out as they are"
        )
    spec_path = Path(spec_path)
    name = name or spec_path.stem
    base_path = spec_path.with_name(spec_path.stem + ".base.yaml")
    plan = make_plan(fits, p.target, ci=0.95)
    cfg = to_train_config(plan, name=name)
    keep = ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "tie_embeddings")
    seq_len = cfg["model"].get("seq_len")
    models = [{k: r["model"][k] for k in keep if r["model"].get(k) is not None} | {"seq_len": seq_len} for r in p.rows]
    spec = {
        "name": name,
        "description": f"scalelab study next: {len(p.rows)} runs ({p.spent:.3g} FLOPs) for the law at "
        f"{p.target:.3g} FLOPs",
        "base": base_path.name,
        "kind": "zip",
        "axes": {"model": models, "train.tokens": [int(round(r["D"])) for r in p.rows]},
    }
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    base_path.write_text(
        "# Written by `scalelab study next`: the base train config of the proposed runs (the recipe of the runs\n"
        "# the law was fitted on); the sweep beside it sets each run's model and tokens.\n"
        + yaml.safe_dump(cfg, sort_keys=False)
    )
    spec_path.write_text(
        "# Written by `scalelab study next`: the runs that most shrink the law's intervals at the target per FLOP.\n"
        f"#   scalelab sweep plan {spec_path.name}; scalelab sweep launch {spec_path.name}\n"
        + yaml.safe_dump(spec, sort_keys=False)
    )
    return spec_path, base_path
