"""The dashboard's step-time and memory profile of a run (HTTP level): the figures carry the
trainer's `time/*` and `mem/*` values as logged; runs without them get no figure; bad ids are refused."""

from __future__ import annotations

import pytest

from tests.helpers import write_run

pytest.importorskip("httpx", reason="fastapi.testclient needs httpx")
from fastapi.testclient import TestClient

from dashboard.server import create_app

CUDA = [
    {
        "step": 10,
        "loss": 5.0,
        "time/data_s": 0.01,
        "time/fwd_bwd_s": 0.5,
        "time/optim_s": 0.1,
        "time/comm_s": 0.2,
        "time/step_s": 0.65,
        "mem/max_allocated_gb": 30.5,
        "mem/max_reserved_gb": 34.0,
    },
    {"step": 15, "val_loss": 4.9},  # an eval-only record: skipped by the figures
    {
        "step": 20,
        "loss": 4.8,
        "time/data_s": 0.02,
        "time/fwd_bwd_s": 0.4,
        "time/optim_s": 0.1,
        "time/comm_s": 0.1,
        "time/step_s": 0.6,
        "mem/max_allocated_gb": 31.0,
        "mem/max_reserved_gb": 34.0,
    },
]
CPU = [
    {
        "step": 2,
        "loss": 6.0,
        "time/data_s": 0.001,
        "time/fwd_bwd_s": 0.2,
        "time/optim_s": 0.01,
        "time/step_s": 0.22,
        "mem/max_rss_gb": 0.9,
    }
]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    runs = tmp_path_factory.mktemp("profile") / "runs"
    for name, recs in (("gpu", CUDA), ("cpu", CPU), ("old", [{"step": 1, "loss": 6.0}])):
        write_run(
            runs / "s" / name,
            config={"model": {"d_model": 48, "n_layers": 2, "n_heads": 4}},
            summary={"status": "done", "steps": 20},
            metrics=recs,
        )
    return TestClient(create_app(runs, tmp_path_factory.mktemp("fits")))


def _fig(d, fid):
    return next(f for f in d["figures"] if f["id"] == fid)


def test_time_breakdown_and_cuda_memory(client):
    d = client.get("/api/profile?run=s/gpu").json()
    assert d["id"] == "s/gpu" and [f["id"] for f in d["figures"]] == ["time", "memory"]
    t = {tr["meta"]: tr for tr in _fig(d, "time")["data"]}
    assert _fig(d, "time")["layout"]["barmode"] == "stack"
    assert t["time/fwd_bwd_s"]["x"] == [10, 20] and t["time/fwd_bwd_s"]["y"] == [0.5, 0.4]
    assert t["time/data_s"]["y"] == [0.01, 0.02] and t["time/optim_s"]["y"] == [0.1, 0.1]
    assert t["other"]["y"] == pytest.approx([0.04, 0.08])  # step - (data + fwd_bwd + optim)
    assert t["time/comm_s"]["type"] == "scatter" and t["time/comm_s"]["y"] == [
        0.2,
        0.1,
    ]  # inside the phases, not stacked
    m = {tr["meta"]: tr for tr in _fig(d, "memory")["data"]}
    assert set(m) == {"mem/max_allocated_gb", "mem/max_reserved_gb"}
    assert m["mem/max_allocated_gb"]["y"] == [30.5, 31.0] and m["mem/max_reserved_gb"]["x"] == [10, 20]


def test_cpu_run_shows_rss_and_no_comm_line(client):
    d = client.get("/api/profile?run=s/cpu").json()
    assert {tr["meta"] for tr in _fig(d, "time")["data"]} == {"time/data_s", "time/fwd_bwd_s", "time/optim_s", "other"}
    assert [tr["meta"] for tr in _fig(d, "memory")["data"]] == ["mem/max_rss_gb"]


def test_run_without_profile_metrics_and_bad_ids(client):
    assert client.get("/api/profile?run=s/old").json()["figures"] == []
    assert client.get("/api/profile?run=s/missing").status_code == 404
    assert client.get("/api/profile?run=%2Fetc%2Fpasswd").status_code in (400, 404)
