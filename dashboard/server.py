"""The FastAPI app: static front end, Plotly from the installed package, read-only JSON/CSV API.

Only GET/HEAD are served (anything else is 405), every run/fit id from the browser goes through
security.py, every file read stays inside the served roots, every string of every response goes
through security.Scrubber (no server paths), and a Content-Security-Policy keeps the page to its
own origin (no CDN, no inline script).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import plotly
from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from dashboard.security import BadId, Scrubber, UnknownId
from dashboard.stores import lineage
from dashboard.stores.fits import FitStore
from dashboard.stores.runs import TABLE_COLUMNS, RunStore
from dashboard.views import evals as evals_view
from dashboard.views import moe_router as moe_view
from dashboard.views import plan as plan_view
from dashboard.views import profile as profile_view
from dashboard.views.api import Views
from scaling.core.errors import InputError

STATIC = Path(__file__).parent / "static"
CURVE_KEYS = (
    "step",
    "tokens",
    "flops",
    "loss",
    "val_loss",
    "val_bpb",
    "lr",
    "grad_norm",
    "tokens_per_s",
    "mfu",
    "wall_s",
)
JOIN_PANELS = ("loss", "val_loss", "lr")  # the curves a branch's join point is given for
MAX_RUNS_PER_REQUEST = 50
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'"
)


def _clean(o, scrub=None):
    """Strict JSON: NaN/inf -> null; string values passed through `scrub` (no server paths)."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, str):
        return scrub(o) if scrub else o
    if isinstance(o, Mapping):  # a dict, or a typed record (FitRecord, PlanRecord): its JSON object
        return {k: _clean(v, scrub) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v, scrub) for v in o]
    return o


class StrictJSON(JSONResponse):
    scrub = None  # a Scrubber; each app uses a subclass that knows its roots

    def render(self, content) -> bytes:
        return json.dumps(_clean(content, self.scrub), allow_nan=False, separators=(",", ":")).encode()


def write_csv(rows: list[dict], columns: list[str] | None, name: str, scrub=None) -> Response:
    cols = columns or sorted({k for r in rows for k in r})
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore")
    w.writeheader()
    for r in rows:
        # a leading =,+,-,@ would be a formula in spreadsheet apps; quote it as text
        w.writerow({k: ("'" + v if isinstance(v, str) and v[:1] in "=+-@" else v) for k, v in _clean(r, scrub).items()})
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)  # ids may hold spaces/non-ASCII; the header must stay plain
    return Response(
        buf.getvalue(), media_type="text/csv", headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )


def _plotly_js() -> Path:

    p = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not p.exists():  # pragma: no cover - broken plotly install
        raise RuntimeError(f"plotly.min.js not found in the installed plotly package ({p})")
    return p


LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "::1", "[::1]"]


def create_app(
    runs_root: str | Path,
    fits_root: str | Path | None = None,
    refresh_s: float = 1.0,
    allowed_hosts: list[str] | None = None,
) -> FastAPI:
    """The app. `allowed_hosts` (Host header check against DNS rebinding) defaults to any;
    the CLI passes the loopback names when bound to 127.0.0.1."""
    runs, fits = RunStore(runs_root, min_interval=refresh_s), FitStore(fits_root, runs_root=runs_root)
    views = Views(runs, fits, runs.root)
    scrub = Scrubber([runs_root, fits_root])
    JSON = type("JSON", (StrictJSON,), {"scrub": staticmethod(scrub)})

    def _csv(rows, columns, name):
        return write_csv(rows, columns, name, scrub)

    plotly_js = _plotly_js()
    app = FastAPI(title="scalelab dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)
    _guard(app, JSON)

    @app.get("/")
    def index():
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    @app.get("/vendor/plotly.min.js")
    def plotly():
        return FileResponse(plotly_js, media_type="application/javascript", headers={"Cache-Control": "max-age=86400"})

    _run_routes(app, runs, fits, JSON, _csv)
    _run_detail_routes(app, runs, JSON, _csv)
    _fit_routes(app, fits, views, JSON, _csv)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.state.runs, app.state.fits = runs, fits
    # warm the run cache in the background so the first page load does not pay the cold scan
    threading.Thread(target=runs.refresh, kwargs={"force": True}, daemon=True, name="dashboard-warm").start()
    return app


def _guard(app: FastAPI, JSON) -> None:
    """Read-only (GET and HEAD), the security headers on every response, and the refusals' status codes."""

    @app.middleware("http")
    async def read_only_and_headers(request: Request, call_next):
        if request.method not in ("GET", "HEAD"):
            return PlainTextResponse("read-only dashboard", status_code=405)
        resp = await call_next(request)
        resp.headers["Content-Security-Policy"] = CSP
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Referrer-Policy"] = "no-referrer"
        return resp

    @app.exception_handler(BadId)
    async def bad_id(_req, exc):
        return JSON({"error": f"refused: {exc}"}, status_code=400)

    @app.exception_handler(InputError)
    async def bad_input(_req, exc):
        return JSON({"error": str(exc)}, status_code=400)

    @app.exception_handler(UnknownId)
    async def unknown_id(_req, exc):
        return JSON({"error": f"unknown id {exc.args[0]!r}"}, status_code=404)


def _ids(runs: RunStore, run: list[str]) -> list[str]:
    """The requested run ids, each validated (400/404) before anything is read."""
    if len(run) > MAX_RUNS_PER_REQUEST:
        raise BadId(f"at most {MAX_RUNS_PER_REQUEST} runs per request")
    for r in run:
        runs.run_dir(r)
    return run


def _run_routes(app: FastAPI, runs: RunStore, fits: FitStore, JSON, _csv) -> None:
    """The runs table, its problems and the runs' curves (JSON and CSV)."""

    @app.get("/api/runs")
    def api_runs():
        t0 = time.perf_counter()
        rows, problems = runs.table()
        for r in rows:
            if not r.get("sweep"):
                r["sweep"] = r["id"].rsplit("/", 1)[0] if "/" in r["id"] else ""
        return JSON(
            {
                "columns": TABLE_COLUMNS,
                "runs": rows,
                "problems": problems,
                "scan_s": runs.last_refresh_s,
                "serve_s": time.perf_counter() - t0,
                "time": time.time(),
            }
        )

    @app.get("/api/runs.csv")
    def api_runs_csv():
        rows, _ = runs.table()
        extra = sorted({k for r in rows for k in r} - set(TABLE_COLUMNS))
        return _csv(rows, TABLE_COLUMNS + extra, "runs.csv")

    @app.get("/api/problems.csv")
    def api_problems_csv():
        return _csv(runs.table()[1] + fits.listing()[1], ["id", "problem"], "problems.csv")

    @app.get("/api/curves")
    def api_curves(run: list[str] = Query(default=[]), branches: bool = False):
        """Each run's series; with `branches`, every run of their families too (a stable run and
        its branches), each with its lineage and the parent's point where its curve joins."""
        ids = _ids(runs, run)
        rows = {r["id"]: r for r in runs.table()[0]}
        if branches:
            ids = lineage.with_families(ids, list(rows.values()), MAX_RUNS_PER_REQUEST)
        recs = {rid: runs.metrics(rid) for rid in ids}
        parents = {r["id"]: r["branch_of"] for r in rows.values() if r.get("branch_served")}
        out = []
        for rid in ids:
            got, bad = recs[rid]
            series = {k: [r.get(k) for r in got] for k in CURVE_KEYS}
            row, parent = rows.get(rid, {}), parents.get(rid)
            join = None
            if parent in rows:
                join = lineage.join_point(
                    recs[parent][0] if parent in recs else runs.metrics(parent)[0],
                    row.get("branch_step"),
                    CURVE_KEYS,
                    JOIN_PANELS,
                )
            out.append(
                {
                    "id": rid,
                    "n_records": len(got),
                    "bad_lines": bad,
                    "series": series,
                    "requested": rid in run,
                    "family": lineage.family_root(rid, parents),
                    "branch_of": row.get("branch_of"),
                    "branch_step": row.get("branch_step"),
                    "join": join,
                }
            )
        return JSON({"runs": out})

    @app.get("/api/curves.csv")
    def api_curves_csv(run: list[str] = Query(default=[])):
        rows = []
        for rid in _ids(runs, run):
            rows += [{"run": rid, **{k: r.get(k) for k in CURVE_KEYS}} for r in runs.metrics(rid)[0]]
        return _csv(rows, ["run", *CURVE_KEYS], "curves.csv")


def _run_detail_routes(app: FastAPI, runs: RunStore, JSON, _csv) -> None:
    """Evaluations, the MoE router and profile panels of runs."""

    def _eval_rows():
        rows, problems = [], []
        for row in runs.table()[0]:
            if row.get("n_evals"):
                r, p = evals_view.rows_for_run(row, runs.evals(row["id"]))
                rows += r
                problems += p
        return rows, problems

    @app.get("/api/evals")
    def api_evals():
        rows, problems = _eval_rows()
        return JSON({"rows": rows, "problems": problems})

    @app.get("/api/evals.csv")
    def api_evals_csv():
        return _csv(
            _eval_rows()[0],
            ["run", "step", "tokens", "flops", "task", "metric", "value", "stderr", "n", "suite", "status"],
            "evals.csv",
        )

    @app.get("/api/moe")
    def api_moe(run: str):
        rid = _ids(runs, [run])[0]
        recs, _ = runs.metrics(rid)
        return JSON(
            {"id": rid, "row": {**runs.row(rid), **runs.moe_shapes().get(rid, {})}, "figures": moe_view.figures(recs)}
        )

    @app.get("/api/profile")
    def api_profile(run: str):
        rid = _ids(runs, [run])[0]
        return JSON({"id": rid, "row": runs.row(rid), "figures": profile_view.figures(runs.metrics(rid)[0])})

    @app.get("/api/moe/compare")
    def api_moe_compare():
        moe = [r for r in runs.table()[0] if r.get("num_experts")][:MAX_RUNS_PER_REQUEST]
        return JSON({"figures": moe_view.compare([(r, runs.metrics(r["id"])[0]) for r in moe])})


def _fit_routes(app: FastAPI, fits: FitStore, views: Views, JSON, _csv) -> None:
    """Fit records, their figures and parameters, MoE scaling and the plan over budgets."""

    @app.get("/api/fits")
    def api_fits():
        items, problems = fits.listing()
        return JSON({"fits": items, "problems": problems})

    @app.get("/api/fit")
    def api_fit(
        id: str,
        task: str | None = None,
        partner: str | None = Query(None, alias="with"),
        color: str = "experts",
        group: str | None = None,
    ):
        return JSON(views.fit(id, task=task, partner=partner, color=color, group=group))

    @app.get("/api/fit.csv")
    def api_fit_csv(id: str):
        rows, cols = _param_rows(fits.record(id))
        return _csv(rows, cols, Path(id).stem + "-params.csv")

    @app.get("/api/moe/scaling")
    def api_moe_scaling(fit: str | None = None, color: str = "experts", x: str = "6nd"):
        return JSON(views.moe(fit, color, x))

    @app.get("/api/moe/scaling.csv")
    def api_moe_scaling_csv():
        pts = views.moe_points()
        return _csv(
            pts, ["id", "E", "G", "top_k", "router", "N", "D", "C_6nd", "flops", "loss"], "moe-loss-vs-compute.csv"
        )

    def _plan_query(
        device: str | None = None,
        precision: str | None = None,
        num_devices: int | None = Query(None, alias="num-devices"),
        mfu: str | None = None,
        usd: float | None = Query(None, alias="usd-per-device-hour"),
        ci: float = 0.95,
        lo: float | None = Query(None, alias="from"),
        hi: float | None = Query(None, alias="to"),
        points: int = plan_view.DEFAULT_POINTS,
        x: str | None = None,
    ) -> dict:
        return {
            "device": device or None,
            "precision": precision or None,
            "num-devices": num_devices,
            "mfu": mfu or None,
            "usd-per-device-hour": usd,
            "ci": ci,
            "from": lo,
            "to": hi,
            "points": points,
            "x": x or None,
        }

    @app.get("/api/plan")
    def api_plan(fit: str | None = None, q: dict = Depends(_plan_query)):
        return JSON(views.plan(fit, q))

    @app.get("/api/plan.csv")
    def api_plan_csv(fit: str | None = None, q: dict = Depends(_plan_query)):
        d = views.plan(fit, q)
        return _csv(d["rows"], plan_view.CSV_COLUMNS, f"plan-{Path(d['fit'] or 'none').stem}.csv")


def _param_rows(rec) -> tuple[list[dict], list[str]]:
    """A fit record's parameters as CSV rows (value, interval) and their columns: one block per task of an
    accuracy record, per value of a --by record's key."""
    per = rec.get("tasks") if isinstance(rec.get("tasks"), dict) else {None: rec}
    if isinstance(rec.get("groups"), dict):  # a --by record: one row block per value of its key
        per = {g: e.get("record") or {} for g, e in rec["groups"].items()}
    rows = []
    for task, r in per.items():
        ivs = r.get("intervals") or {}
        rows += [
            {
                "task": task,
                "param": k,
                "value": v,
                "lo": (ivs.get(k) or [None, None])[0],
                "hi": (ivs.get(k) or [None, None])[1],
            }
            for k, v in (r.get("params") or {}).items()
            if v is None or isinstance(v, (int, float))
        ]
    cols = (["task"] if rec.get("tasks") else [rec["by"]] if rec.get("groups") else []) + [
        "param",
        "value",
        "lo",
        "hi",
    ]
    if rec.get("groups"):
        rows = [{rec["by"]: r.pop("task"), **r} for r in rows]
    return rows, cols
