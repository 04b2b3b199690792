"""Dashboard data layer without a browser: id validation, incremental caches, figure builders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dashboard.security import BadId, UnknownId, check_id, inside
from dashboard.stores.runs import RunStore
from dashboard.views import moe_router as moe_view
from dashboard.views import scaling as scaling_view
from tests.helpers import small_run


@pytest.mark.parametrize(
    "bad", ["", "..", "../x", "a/../../b", "/etc/passwd", "a//b", "a/./b", "a\\..\\b", "a\x00b", "x" * 600]
)
def test_bad_ids_refused(bad):
    with pytest.raises(BadId):
        check_id(bad)


def test_symlink_escape_refused(tmp_path):
    (tmp_path / "root").mkdir()
    os.symlink("/etc", tmp_path / "root" / "link")
    with pytest.raises(BadId):
        inside(tmp_path / "root", "link/passwd")


def test_cache_and_incremental_metrics(tmp_path):
    small_run(tmp_path, "s/a")
    live = small_run(tmp_path, "s/b", finished=False)
    (tmp_path / "s" / "bad").mkdir()
    (tmp_path / "s" / "bad" / "summary.json").write_text("{")
    store = RunStore(tmp_path, min_interval=0)
    rows, problems = store.table()
    assert {r["id"] for r in rows} == {"s/a", "s/b"} and problems[0]["id"] == "s/bad"
    first = store._rows["s/a"][1]
    store.refresh()
    assert store._rows["s/a"][1] is first  # finished run not re-read
    recs, _ = store.metrics("s/b")
    assert len(recs) == 3
    with open(live / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 3, "loss": 4.6}) + "\n" + '{"step": 4, "lo')  # torn last line
    recs, bad = store.metrics("s/b")
    assert [r["step"] for r in recs] == [0, 1, 2, 3] and bad == 0
    with open(live / "metrics.jsonl", "a") as f:
        f.write('ss": 4.5}\n')
    assert [r["step"] for r in store.metrics("s/b")[0]] == [0, 1, 2, 3, 4]
    with pytest.raises(UnknownId):
        store.metrics("s/bad")


def test_figures_from_records():
    figs = moe_view.figures(
        [
            {"step": s, "moe/layer0/load/expert0": 0.6, "moe/layer0/load/expert1": 0.4, "moe/layer0/imbalance": 1.2}
            for s in (1, 2)
        ]
    )
    assert figs[0]["data"][0]["z"] == [[0.6, 0.6], [0.4, 0.4]] and figs[1]["id"] == "imbalance"
    rec = {
        "law": "chinchilla",
        "approach": 3,
        "params": {"E": 1.8, "A": 480.0, "B": 2100.0, "alpha": 0.35, "beta": 0.37},
        "data_range": {"C": [1e15, 1e17]},
    }
    pts = [{"N": n, "D": 1e17 / (6 * n), "loss": 3.0, "flops": 1e17} for n in (1e6, 3e6, 1e7)]
    by_id = {f["id"]: f for f in scaling_view.figures(rec, pts)}
    assert set(by_id) == {"loss_vs_n", "isoflop", "frontier"}
    front = by_id["frontier"]["data"][0]
    # N_opt = G (C/6)^a at the smallest C
    a, G = 0.37 / 0.72, (0.35 * 480 / (0.37 * 2100)) ** (1 / 0.72)
    assert front["y"][0] == pytest.approx(G * (1e15 / 6) ** a)


def test_eval_rows_tolerate_schema_drift():
    from dashboard.views.evals import rows_for_run

    row = {"id": "s/a", "flops_per_token": 10.0}
    evs = [
        {
            "step": 5,
            "doc": {
                "tokens": 100,
                "results": [{"task": "t", "value": 0.5}, "junk", {"value": 1}],
                "failed": [{"task": "u", "error": "boom"}],
            },
            "problem": None,
        },
        {"step": 6, "doc": None, "problem": "6.json: unreadable"},
    ]
    rows, problems = rows_for_run(row, evs)
    assert [(r["task"], r["metric"], r["flops"], r["status"]) for r in rows] == [
        ("t", "value", 1000.0, "ok"),
        ("u", "failed", 1000.0, "failed"),
    ]
    assert problems == [{"id": "s/a", "problem": "evals/6.json: unreadable"}]


def test_fit_store_lists_bad_records_and_refuses_unknown(tmp_path):
    from dashboard.stores.fits import FitStore

    (tmp_path / "good.json").write_text(
        json.dumps({"law": "kaplan", "params": {"Nc": 1.0}, "source": "/nonexistent.csv"})
    )
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "other.json").write_text("[]")
    store = FitStore(tmp_path)
    items, problems = store.listing()
    assert [i["id"] for i in items] == ["good.json"] and {p["id"] for p in problems} == {"bad.json", "other.json"}
    rec = store.record("good.json")
    assert store.points(rec)[1] == "its data source is not available on this machine"  # no server path echoed
    with pytest.raises(UnknownId):
        store.record("bad.json")
    with pytest.raises(BadId):
        store.record("../good.json")


def test_a_fit_record_of_a_newer_schema_version_is_a_problem_not_a_crash(tmp_path):
    from dashboard.stores.fits import FitStore

    (tmp_path / "good.json").write_text(json.dumps({"law": "kaplan", "params": {"Nc": 1.0}, "schema_version": 1}))
    (tmp_path / "newer.json").write_text(json.dumps({"law": "kaplan", "params": {"Nc": 1.0}, "schema_version": 99}))
    items, problems = FitStore(tmp_path).listing()
    assert [i["id"] for i in items] == ["good.json"]
    assert problems == [{"id": "newer.json", "problem": problems[0]["problem"]}]
    assert "schema_version 99 is newer than this scalelab reads" in problems[0]["problem"]


def test_runs_table_shows_epochs(tmp_path):
    from dashboard.stores.runs import TABLE_COLUMNS

    d = small_run(tmp_path, "s/a")
    (d / "summary.json").write_text(json.dumps({"status": "done", "steps": 3, "epochs": 1.25, "unique_tokens": 4096}))
    rows, _ = RunStore(tmp_path, min_interval=0).table()
    assert rows[0]["epochs"] == 1.25 and rows[0]["unique_tokens"] == 4096
    assert TABLE_COLUMNS.index("epochs") == TABLE_COLUMNS.index("tokens") + 1
    js = (Path(__file__).resolve().parents[3] / "dashboard/static/views/runs.js").read_text()
    assert '{ key: "epochs", label: "epochs"' in js


def test_moe_view_shows_router_health():
    """The router-health metrics of the study (k distribution, routing change, per-micro-batch
    imbalance, load entropy, dead experts, realised k) become figures of the MoE view."""
    recs = [
        {
            "step": s,
            "moe/layer0/load/expert0": 0.5,
            "moe/layer0/load/expert1": 0.5,
            "moe/layer0/imbalance_micro": 1.3,
            "moe/layer0/load_entropy": 0.99,
            "moe/layer0/dead_experts": 0.0,
            "moe/layer0/active_experts": 1.9,
            "moe/active_experts": 1.9,
            "moe/k_frac/k0": 0.0,
            "moe/k_frac/k1": 0.3,
            "moe/k_frac/k2": 0.7,
            **({"moe/routing_change": 0.25} if s == 2 else {}),
        }
        for s in (1, 2)
    ]
    figs = {f["id"]: f for f in moe_view.figures(recs)}
    assert {"imbalance_micro", "load_entropy", "dead_experts", "active_experts"} <= set(figs)
    k = figs["k_distribution"]["data"]
    assert [t["name"] for t in k] == ["1 experts", "2 experts"] and k[1]["y"] == [0.7, 0.7]
    assert figs["routing_change"]["data"][0]["x"] == [2] and figs["routing_change"]["data"][0]["y"] == [0.25]
    cmp = moe_view.compare([({"id": "r", "router": "sigmoid_threshold"}, recs)])
    assert {f["id"] for f in cmp} >= {"compare_active_experts", "compare_routing_change"}
