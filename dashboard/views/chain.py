"""The loss-to-accuracy chain in the Scaling view (OLMo's ladder, Bhagia et al. 2024), one task at a time.

Step 1, N, D -> task loss: a `fit task-loss` record's law for the task (or, for an accuracy fit on
the validation loss, an approach-3 `fit chinchilla` record), drawn against compute with its data.
Step 2, task loss -> accuracy: a `fit accuracy` record's sigmoid with its data points, its
bootstrap band and the task's chance accuracy.
The chain, N, D -> accuracy: step 2 through step 1 at each model size, with the chain's own
prediction interval (scaling.planning.accuracy_chain.predict_chain) at every evaluated run beside the
accuracy it measured. A record is paired with a partner of the other step when one in --fits
chains with it (scaling.planning.accuracy_chain.check). A step whose fit is not identified for the task
(dashboard.stores.fit_checks) is not drawn; its data are.
"""

from __future__ import annotations

import numpy as np

from dashboard.stores.fit_data import n_kind
from dashboard.views.plotting import PALETTE, arr, band, error_y, fig, group, note, percentile_band
from scaling.core.conventions import TokenCost
from scaling.core.errors import InputError
from scaling.fits.accuracy import SigmoidAccuracy
from scaling.fits.record import FitRecord
from scaling.laws.registry import from_record
from scaling.planning.accuracy_chain import check, predict_chain

SIGMOID = ("a", "b", "k", "L0")
CHAIN_LAWS = ("accuracy", "task-loss")


def tasks_of(rec: dict) -> list[str]:
    if rec.get("tasks"):
        return list(rec["tasks"])
    names = (rec.get("settings") or {}).get("tasks") or []
    return [names[0] if len(names) == 1 else "task"]


def task_fit(rec: dict, task: str) -> dict:
    return (rec.get("tasks") or {}).get(task) or rec


def chains(acc: dict, loss: dict) -> bool:
    """Does `loss` (task-loss, or chinchilla for a val_loss accuracy fit) feed `acc` for a shared task?"""

    try:
        if loss.get("law") == "task-loss":
            check(acc, loss)
            return bool(set(tasks_of(acc)) & set(tasks_of(loss))) or len(tasks_of(loss)) == 1
        check(acc, None, loss)
        return True
    except InputError:
        return False


def partners(rec: dict, others: list[tuple[str, dict]]) -> list[str]:
    """Ids of the records that make a chain with `rec`."""
    out = []
    for oid, o in others:
        if rec.get("law") == "accuracy" and o.get("law") in ("task-loss", "chinchilla") and chains(rec, o):
            out.append(oid)
        elif rec.get("law") == "task-loss" and o.get("law") == "accuracy" and chains(o, rec):
            out.append(oid)
    return out


def _loss_step(loss: dict, task: str):
    """(law, token cost, label, the record a chain call takes) of step 1 for `task`."""

    if loss.get("law") == "task-loss":
        key = task if task in (loss.get("tasks") or {}) else next(iter(loss["tasks"]))
        sub = FitRecord(loss["tasks"][key])
        return (
            from_record(sub),
            TokenCost.from_record(sub),
            (loss.get("settings") or {}).get("loss_metric") or "task loss",
            sub,
        )
    return from_record(loss), TokenCost.from_record(loss), "validation loss", loss


def _task_points(points: list[dict], task: str, single: bool) -> list[dict]:
    return points if single else [p for p in points if str(p.get("task")) == task]


def figures(task: str, acc=None, loss=None, ci: float = 0.95) -> list[dict]:
    """acc, loss: (record, points, draw_fit) of each step, or None. Figures in chain order."""
    figs = []
    step1 = _loss_step(loss[0], task) if loss else None
    if loss:
        rec, pts, draw = loss
        pts = pts if rec.get("law") == "chinchilla" else _task_points(pts, task, len(tasks_of(rec)) == 1)
        figs.append(_loss_vs_compute(task, step1, pts, draw))
    if acc:
        figs.append(_acc_vs_loss(task, acc, ci))
    if acc and loss and acc[2] and loss[2]:
        figs.append(_acc_vs_compute(task, acc[0], loss[0], step1, _chain_points(task, acc, loss), ci))
    return figs


def _chain_points(task, acc, loss) -> list[dict]:
    """The runs to show the chain at: step 1's (with their measured accuracy when its reader gives it),
    else step 2's evaluated runs when they carry N and D in step 1's parameter count (run trees: total)."""

    own = loss[1] if loss[0].get("law") == "chinchilla" else _task_points(loss[1], task, len(tasks_of(loss[0])) == 1)
    if any(p.get("acc") is not None for p in own):
        return own
    evaluated = [
        p
        for p in _task_points(acc[1], task, not acc[0].get("tasks"))
        if p.get("N") and p.get("D") and p.get("acc") is not None
    ]
    return evaluated if evaluated and n_kind(loss[0]) == "total" else own


def _n_groups(pts):
    N = arr(pts, "N")
    return N, (group(N, rel_tol=0.1)[:10] if pts else [])


def _loss_vs_compute(task, step1, pts, draw):
    law, cost, label, _ = step1
    N, groups = _n_groups(pts)
    D, L = arr(pts, "D"), arr(pts, "loss")
    data = []
    for gi, idx in enumerate(groups):
        col, n = PALETTE[gi % len(PALETTE)], float(np.exp(np.mean(np.log(N[idx]))))
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": (cost(N[idx]) * D[idx]).tolist(),
                "y": L[idx].tolist(),
                "name": f"N≈{n:.3g}",
                "marker": {"color": col},
                "legendgroup": str(gi),
                "text": [str(p.get("run") or "") for p in (pts[i] for i in idx)],
            }
        )
        if draw:
            ds = np.geomspace(D[idx].min() / 1.5, D[idx].max() * 1.5, 40)
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "x": (cost(n) * ds).tolist(),
                    "y": np.asarray(law.predict(n, ds)).tolist(),
                    "name": f"law N≈{n:.3g}",
                    "line": {"color": col},
                    "legendgroup": str(gi),
                    "showlegend": False,
                }
            )
    title = f"{task} · step 1: {label} vs compute"
    return note(
        fig("task_loss", title, data, f"C ({cost.compute})", label),
        "points: evaluated runs; lines: the law at each model size",
    )


def _acc_vs_loss(task, acc, ci):
    rec, pts, draw = acc
    r = task_fit(rec, task)
    pts = _task_points(pts, task, not rec.get("tasks"))
    L, A = arr(pts, "loss"), arr(pts, "acc")
    metric = (rec.get("settings") or {}).get("loss_metric") or "loss"
    data = [
        {
            "type": "scatter",
            "mode": "markers",
            "x": L.tolist(),
            "y": A.tolist(),
            "name": "evaluated runs",
            "marker": {"color": PALETTE[0]},
        }
    ]
    lo, hi = r.get("loss_range") or [np.nanmin(L) if L.size else None, np.nanmax(L) if L.size else None]
    if draw and lo is not None:
        pad = 0.1 * (hi - lo or 1.0)
        ls = np.linspace(lo - pad, hi + pad, 80)
        s = (r.get("bootstrap") or {}).get("samples") or {}
        if all(k in s for k in SIGMOID):
            P = {k: np.asarray([np.nan if v is None else v for v in s[k]], float)[:, None] for k in SIGMOID}
            b = percentile_band(SigmoidAccuracy(**P).predict(ls[None, :]), ci)
            if b is not None:
                data.insert(0, band(ls, b[0], b[1], f"{ci:.0%} interval (bootstrap of the sigmoid)"))
        curve = SigmoidAccuracy(**{k: r["params"][k] for k in SIGMOID}).predict(ls)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": ls.tolist(),
                "y": curve.tolist(),
                "name": "sigmoid fit",
                "line": {"color": PALETTE[1]},
            }
        )
    if r.get("chance") is not None and L.size:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": [float(np.nanmin(L)), float(np.nanmax(L))],
                "y": [r["chance"]] * 2,
                "name": f"chance {r['chance']:.3g}",
                "line": {"color": "#999", "dash": "dot"},
            }
        )
    return fig("accuracy", f"{task} · step 2: accuracy vs {metric}", data, metric, "accuracy", logx=False)


def _acc_vs_compute(task, acc_rec, loss_rec, step1, pts, ci):

    law, cost, _, _ = step1
    r = task_fit(acc_rec, task)
    sig = SigmoidAccuracy(**{k: r["params"][k] for k in SIGMOID})
    N, groups = _n_groups(pts)
    D = arr(pts, "D")
    kw = {"task_loss": loss_rec} if loss_rec.get("law") == "task-loss" else {"chinchilla": loss_rec}
    label = task if acc_rec.get("tasks") else "task"
    data = []
    for gi, idx in enumerate(groups):
        col, n = PALETTE[gi % len(PALETTE)], float(np.exp(np.mean(np.log(N[idx]))))
        ds = np.geomspace(D[idx].min() / 1.5, D[idx].max() * 1.5, 40)
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": (cost(n) * ds).tolist(),
                "y": sig.predict(law.predict(n, ds)).tolist(),
                "name": f"chain N≈{n:.3g}",
                "line": {"color": col},
                "legendgroup": str(gi),
            }
        )
        seen = [i for i in idx if pts[i].get("acc") is not None]
        if not seen:
            continue
        pred = [predict_chain(acc_rec, N[i], D[i], ci=ci, **kw)["tasks"].get(label) or {} for i in seen]
        xs = (cost(N[seen]) * D[seen]).tolist()
        ys = [p.get("acc") for p in pred]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": xs,
                "y": ys,
                "name": f"chain prediction, {ci:.0%} interval",
                "legendgroup": str(gi),
                "marker": {"color": col, "symbol": "line-ew-open", "size": 14},
                "showlegend": gi == 0,
                "error_y": error_y(ys, [p.get("interval") for p in pred]),
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": xs,
                "y": [pts[i]["acc"] for i in seen],
                "name": "measured accuracy",
                "legendgroup": str(gi),
                "marker": {"color": col},
                "showlegend": gi == 0,
            }
        )
    title = f"{task} · the chain: N, D → {step1[2]} → accuracy"
    return note(
        fig("chain", title, data, f"C ({cost.compute})", "accuracy"),
        "lines: the sigmoid of the step-1 law per model size; bars: "
        f"the chain's {ci:.0%} prediction interval at each evaluated run",
    )
