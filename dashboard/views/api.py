"""The JSON behind the views that combine records: any fit record's figures (the chain of
task-loss and accuracy fits, lr-annealing curves, MoE laws), the MoE view's loss vs compute, and
the Plan view. Routes are registered by `register`; bad inputs raise scaling's InputError (-> 400
naming the input), unknown ids UnknownId (-> 404), as everywhere in the app."""

from __future__ import annotations

import threading
from pathlib import Path

from dashboard.stores.fit_checks import not_identified
from dashboard.views import by as by_view
from dashboard.views import chain as chain_view
from dashboard.views import moe_law as moe_law_view
from dashboard.views import plan as plan_view
from dashboard.views import scaling as scaling_view
from dashboard.views.plotting import readable_y
from scaling.core.errors import InputError
from scaling.fits.record import FitRecord
from scaling.planning.devices import DEVICES, PRECISIONS

SUMMARY_KEYS = (
    "law",
    "approach",
    "params",
    "intervals",
    "objective",
    "n_points",
    "warnings",
    "data_sha256",
    "n_kind",
    "data_range",
    "derived",
    "holdout",
    "models",
    "form",
    "settings",
    "conventions",
    "chance",
    "loss_range",
    "design",
)
NOT_DRAWN = " — fitted law not drawn (not identified)"


def summary(rec: dict, task: str | None = None) -> dict:
    out = {k: rec.get(k) for k in SUMMARY_KEYS}
    if task is not None and rec.get("tasks"):
        sub = rec["tasks"].get(task) or {}
        out.update(
            {
                k: sub.get(k)
                for k in ("params", "intervals", "objective", "n_points", "chance", "loss_range", "holdout")
                if k in sub
            }
        )
        out["task"] = task
    return out


def _safe(build, law):
    try:
        return build()
    except (KeyError, TypeError, ValueError, ZeroDivisionError, InputError) as exc:
        return [{"id": "error", "title": f"cannot draw this {law} record: {exc}", "data": [], "layout": {}}]


class Views:
    def __init__(self, runs, fits, runs_root):
        self.runs, self.fits, self.runs_root = runs, fits, Path(runs_root)
        self._plans: dict[tuple, dict] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------ any fit record
    def fit(
        self,
        fid: str,
        task: str | None = None,
        partner: str | None = None,
        color: str = "experts",
        group: str | None = None,
    ) -> dict:
        rec = self.fits.record(fid)
        if rec.get("groups"):  # a --by record: one law per value, its points carried in the record
            v = by_view.view(rec, group)
            sub = {**summary(v["sub"]), "group": v["group"], "by": v["by"]}
            return {
                "id": fid,
                "points_note": None,
                "n_data_points": len(v["points"]),
                "record": sub,
                "not_identified": v["flags"],
                "figures": _safe(lambda: v["figures"], rec.get("law")),
                "by": v["by"],
                "groups": v["groups"],
                "group": v["group"],
                "compare": v["compare"],
            }
        points, why = self.fits.points(rec, fid)
        law = rec.get("law")
        out = {"id": fid, "points_note": why, "n_data_points": len(points)}
        if law in chain_view.CHAIN_LAWS:
            return {**out, **self._chain(fid, rec, points, task, partner)}
        flags = not_identified(rec)
        if law == "moe":
            if color not in moe_law_view.COLOR_BY:
                raise InputError(f"color must be one of {', '.join(moe_law_view.COLOR_BY)} (got {color!r})")
            figs = _safe(lambda: moe_law_view.law_figures(rec, points, not flags, by=color), law)
            _finish(figs, not flags)
        else:
            figs = scaling_view.figures(rec, points, draw_fit=not flags)
        return {**out, "record": summary(rec), "not_identified": flags, "figures": figs}

    def _chain(self, fid, rec, points, task, partner) -> dict:
        tasks = chain_view.tasks_of(rec)
        task = task if task is not None else tasks[0]
        if task not in tasks:
            raise InputError(f"task {task!r} is not in this fit (tasks: {', '.join(tasks)})")
        multi = bool(rec.get("tasks"))
        flags = not_identified(rec, task) if multi else not_identified(rec)
        others = [(i["id"], self.fits.record(i["id"])) for i in self.fits.listing()[0] if i["id"] != fid]
        cands = chain_view.partners(rec, others)
        if partner in (None, ""):
            partner = cands[0] if cands else None
        elif partner == "none":
            partner = None
        elif partner not in cands:
            raise InputError(f"{partner!r} does not chain with {fid} (records that do: {', '.join(cands) or 'none'})")
        mine = (rec, points, not flags)
        other, extra = None, {"partner": partner, "partners": cands}
        if partner:
            prec = self.fits.record(partner)
            ppts, pwhy = self.fits.points(prec, partner)
            pflags = not_identified(prec, task) if prec.get("tasks") and task in prec["tasks"] else not_identified(prec)
            other = (prec, ppts, not pflags)
            extra.update(partner_law=prec.get("law"), partner_not_identified=pflags, partner_points_note=pwhy)
        acc, loss = (mine, other) if rec.get("law") == "accuracy" else (other, mine)
        ci = float((rec.get("settings") or {}).get("ci") or 0.95)
        figs = _safe(lambda: chain_view.figures(task, acc=acc, loss=loss, ci=ci), rec.get("law"))
        drawn = {"task_loss": bool(loss and loss[2]), "accuracy": bool(acc and acc[2]), "chain": True}
        for f in figs:
            readable_y(f)
            if not drawn.get(f["id"], True):
                f["title"] += NOT_DRAWN
                f["layout"]["title"]["text"] = f["title"]
        return {
            "record": summary(rec, task if multi else None),
            "not_identified": flags,
            "tasks": tasks,
            "task": task,
            "figures": figs,
            **extra,
        }

    # ------------------------------------------------------------ MoE view
    def moe(self, fit: str | None, color: str, x: str) -> dict:
        if color not in moe_law_view.COLOR_BY:
            raise InputError(f"color must be one of {', '.join(moe_law_view.COLOR_BY)} (got {color!r})")
        if x not in moe_law_view.X_KINDS:
            raise InputError(f"x must be one of {', '.join(moe_law_view.X_KINDS)} (got {x!r})")
        pts = self.moe_points()
        items = [f for f in self.fits.listing()[0] if f["law"] == "moe"]
        out = {
            "color": color,
            "x": x,
            "n_runs": len(pts),
            "runs_figure": moe_law_view.runs_figure(pts, color, x),
            "fits": items,
            "fit": None,
        }
        fid = fit if fit is not None else (items[0]["id"] if items else "")
        if fid:
            if fid not in {f["id"] for f in items}:
                self.fits.record(fid)  # 400/404 for a bad or unknown id first
                raise InputError(f"{fid!r} is not a `fit moe` record")
            out["fit"] = self.fit(fid, color=color)
        return out

    # ------------------------------------------------------------ Plan view
    def plan(self, fit: str | None, q: dict) -> dict:
        from scaling.planning.budget import BudgetOptions  # deferred: imports scipy
        from scaling.planning.planners import planners  # deferred: imports scipy

        laws = [p.law for p in planners() if p.allocates]  # the laws that size the run (Chinchilla today)
        items = [f for f in self.fits.listing()[0] if f["law"] in laws and not f.get("by")]
        fid = fit or next((f["id"] for f in items if f.get("approach") == 3), items[0]["id"] if items else None)

        out = {
            "fits": items,
            "fit": fid,
            "inputs": q,
            "rows": [],
            "figures": [],
            "warnings": [],
            "devices": list(DEVICES),
            "precisions": list(PRECISIONS),
            "cost_axes": plan_view.COST_AXES,
        }
        if fid is None:
            return out
        rec = self.fits.record(fid)
        if rec.get("law") not in laws:
            given = " or ".join(f"`fit {law}`" for law in laws)
            raise InputError(f"the plan view plans from a {given} record; {fid!r} is a {rec.get('law')} fit")
        if rec.get("by"):
            raise InputError(f"{fid!r} holds one law per {rec['by']} (a --by fit): plan from a fit of one value's runs")
        if not 0 < q["ci"] < 1:
            raise InputError(f"ci must be in (0, 1) (got {q['ci']})")
        if q["device"] and q["mfu"] in (None, "auto") and self._runs_link_out():
            raise InputError(
                "mfu auto reads every finished run under --runs, and "
                "some of their files link outside it (see the Runs view's "
                "problems): give mfu as a number"
            )
        opts = BudgetOptions(
            compute=1.0,
            device=q["device"] or None,
            precision=q["precision"],
            num_devices=q["num-devices"],
            mfu=q["mfu"],
            usd_per_device_hour=q["usd-per-device-hour"],
            runs=str(self.runs_root),
        )
        hw = plan_view.hardware(opts, self.runs_root)
        x = q["x"] or ("usd" if hw and hw.usd_per_device_hour else "device_hours" if hw else "compute")
        if (
            x not in plan_view.COST_AXES
            or (x != "compute" and hw is None)
            or (x == "usd" and not (hw and hw.usd_per_device_hour))
        ):
            raise InputError(
                f"x must be one of {', '.join(plan_view.COST_AXES)}; device-hours "
                "and days need a device, usd a usd-per-device-hour too"
            )
        flags = not_identified(rec)
        out.update(x=x, not_identified=flags, approach=rec.get("approach"))
        if flags:
            return out
        Cs = plan_view.budgets(rec, q["from"], q["to"], q["points"])
        key = (fid, id(rec), tuple(sorted((k, str(v)) for k, v in q.items() if k != "x")))
        with self._lock:
            got = self._plans.get(key)
        if got is None:
            others = [FitRecord(r) for r in self._cross_check(items, fid, rec)]
            got = dict(
                zip(("rows", "warnings", "cost"), plan_view.plan_rows(FitRecord(rec), Cs, hw, q["ci"], others, opts))
            )
            with self._lock:
                if len(self._plans) > 32:
                    self._plans.clear()
                self._plans[key] = got
        cost = got["cost"] or {}
        out.update(
            rows=got["rows"],
            warnings=got["warnings"],
            figures=plan_view.figures(got["rows"], x, q["ci"]),
            assumptions={
                k: cost.get(k)
                for k in (
                    "device",
                    "precision",
                    "peak_flops",
                    "peak_source",
                    "mfu",
                    "mfu_source",
                    "mfu_interval",
                    "num_devices",
                    "usd_per_device_hour",
                )
            }
            if cost
            else None,
            conventions=(rec.get("conventions") or {}).get("compute"),
        )
        return out

    def _cross_check(self, items: list[dict], fid: str, rec: dict) -> list[dict]:
        """With an approach-3 record: the approach-2 record fitted on the same runs (its `source`), whose
        compute-optimal exponent the plan's verdict compares (none when there is none or several)."""
        if rec.get("approach") != 3 or not rec.get("source"):
            return []
        same = []
        for f in items:
            if f["id"] != fid and f.get("approach") == 2:
                other = self.fits.record(f["id"])
                if other.get("source") == rec["source"]:
                    same.append(other)
        return same if len(same) == 1 else []

    def moe_points(self) -> list[dict]:
        """The MoE view's runs: registry rows with the MoE runs' shape (granularity)."""
        shapes = self.runs.moe_shapes()
        return moe_law_view.run_points([{**r, **shapes.get(r["id"], {})} for r in self.runs.table()[0]])

    def _runs_link_out(self) -> bool:
        return any("links outside" in (p.get("problem") or "") for p in self.runs.table()[1])


def _finish(figs, drawn: bool) -> None:
    for f in figs:
        readable_y(f)
        if not drawn:
            f["title"] += NOT_DRAWN
            f["layout"].setdefault("title", {})["text"] = f["title"]
