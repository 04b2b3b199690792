"""The optimizer in the dashboard (HTTP level, no browser): the runs table's `optim` column (adamw
for a config that predates optim.name) and a `fit chinchilla --by optim.name` record in the Scaling
view: one value at a time, its compare block, a shared figure, the per-value CSV; the Plan view
does not offer it."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

pytest.importorskip("httpx", reason="fastapi.testclient needs httpx")
from fastapi.testclient import TestClient

from dashboard.server import create_app
from launch.cli import main as scalelab
from scaling.synthetic.runs import TRUE_CHINCHILLA, chinchilla_table, data_multiplied, write_run_tree


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("by-dash")
    runs, fits = base / "runs", base / "fits"
    budgets = (1e17, 1e18, 1e19)
    write_run_tree(
        runs, chinchilla_table(noise=0.002, seed=1, n_per_budget=5, budgets=budgets), sweep="adamw", extra_broken=False
    )
    write_run_tree(
        runs,
        chinchilla_table(data_multiplied(TRUE_CHINCHILLA, 2.0), noise=0.002, seed=2, n_per_budget=5, budgets=budgets),
        sweep="muon",
        extra_broken=False,
        optim="muon",
    )
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = scalelab(
            ["fit", "chinchilla", str(runs), "--by", "optim.name", "--bootstrap", "8", "--out", str(fits / "by.json")]
        )
    assert code == 0, err.getvalue()
    return TestClient(create_app(runs, fits, refresh_s=0))


def test_runs_table_has_the_optimizer(served):
    rows = served.get("/api/runs").json()["runs"]
    got = {r["id"].split("/")[0]: r["optim"] for r in rows}
    assert got == {"adamw": "adamw", "muon": "muon"}  # adamw configs have no optim.name: the schema default
    js = (Path(__file__).resolve().parents[3] / "dashboard/static/views/runs.js").read_text()
    assert '{ key: "optim", label: "optimizer"' in js
    assert "optim" in served.get("/api/runs.csv").text.splitlines()[0].split(",")


def test_scaling_view_shows_one_value_at_a_time_and_the_comparison(served):
    fits = served.get("/api/fits").json()["fits"]
    assert [(f["id"], f["by"], f["not_identified"]) for f in fits] == [("by.json", "optim.name", False)]
    d = served.get("/api/fit", params={"id": "by.json"}).json()
    assert d["by"] == "optim.name" and d["groups"] == ["adamw", "muon"] and d["group"] == "adamw"
    assert d["record"]["group"] == "adamw" and d["record"]["params"]["alpha"] == pytest.approx(0.35, abs=0.03)
    assert d["n_data_points"] == 15 and d["not_identified"] == []
    m = d["compare"]["others"]["muon"]
    assert (
        d["compare"]["baseline"] == "adamw"
        and m["compute_multiplier"] == pytest.approx(2.0, rel=0.1)
        and len(m["interval"]) == 2
    )
    ids = [f["id"] for f in d["figures"]]
    assert ids[0] == "by_frontier" and "frontier" in ids
    shared = d["figures"][0]
    names = [t["name"] for t in shared["data"]]
    assert {"adamw runs", "muon runs", "adamw L*(C)", "muon L*(C)"} <= set(names)
    assert any(n.startswith("adamw needs ×") for n in names)
    mu = served.get("/api/fit", params={"id": "by.json", "group": "muon"}).json()
    assert mu["group"] == "muon" and mu["record"]["params"]["B"] != d["record"]["params"]["B"]
    bad = served.get("/api/fit", params={"id": "by.json", "group": "sgd"})
    assert bad.status_code == 400 and "sgd" in bad.json()["error"] and "adamw, muon" in bad.json()["error"]
    csv = served.get("/api/fit.csv", params={"id": "by.json"}).text.splitlines()
    assert csv[0] == "optim.name,param,value,lo,hi" and any(r.startswith("muon,alpha,") for r in csv)
    js = (Path(__file__).resolve().parents[3] / "dashboard/static/views/scaling.js").read_text()
    assert 'id: "fit-group"' in js and 'id: "fit-compare"' in js


def test_plan_view_does_not_plan_from_a_by_record(served):
    d = served.get("/api/plan").json()
    assert d["fits"] == [] and d["fit"] is None
    bad = served.get("/api/plan", params={"fit": "by.json"})
    assert bad.status_code == 400 and "one law per optim.name" in bad.json()["error"]
