"""Branches in the dashboard (HTTP level): the runs table names each branch's parent and step, and
the curves endpoint brings a selected run's whole family (the stable run and its branches) with the
point of the stable curve where each branch joins it. Run directories as the trainer leaves them
(summary.json `init_from`, metrics from step N+1); a branch still training (no summary) takes its
lineage from its config. The browser side is in test_dashboard_browser.py (a real wsd sweep)."""

from __future__ import annotations

import pytest

from tests.helpers import write_run

pytest.importorskip("httpx", reason="fastapi.testclient needs httpx")
from fastapi.testclient import TestClient

from dashboard.server import create_app

TPS = 256  # tokens per step


def recs(first: int, last: int, loss0: float, lr: float) -> list[dict]:
    return [
        {"step": s, "tokens": s * TPS, "flops": 1e6 * s * TPS, "loss": loss0 - s / 100, "lr": lr}
        for s in range(first, last + 1, 2)
    ]


@pytest.fixture()
def client(tmp_path):
    runs = tmp_path / "runs"
    stable = runs / "w" / "n50k-stable"
    evals = [{"step": s, "tokens": s * TPS, "flops": 1e6 * s * TPS, "val_loss": 5.5 - s / 100} for s in (4, 12, 20)]
    write_run(
        stable,
        config={"train": {"steps": 32}},
        metrics=sorted(recs(2, 32, 5.0, 1e-3) + evals, key=lambda r: r["step"]),
        summary={"status": "done", "steps": 32, "tokens": 32 * TPS, "flops": 32 * TPS * 1e6, "final_val_loss": 4.6},
    )
    for name, steps, point in (("n50k-d2.05k", 8, 6), ("n50k-d4.1k", 16, 13)):
        write_run(
            runs / "w" / name,
            config={"train": {"steps": steps, "init_from": f"{stable}/checkpoints/step_{point}"}},
            metrics=recs(point + 1, steps, 4.9, 1e-4),
            summary={
                "status": "done",
                "steps": steps,
                "tokens": steps * TPS,
                "flops": steps * TPS * 1e6,
                "final_val_loss": 4.8,
                "init_from": {"run": str(stable), "step": point},
                "shared_tokens": point * TPS,
                "shared_flops": point * TPS * 1e6,
            },
        )
    # a branch of a branch, still training: lineage from its config's train.init_from
    write_run(
        runs / "w" / "n50k-d4.1k-again",
        config={"train": {"steps": 20, "init_from": f"{runs}/w/n50k-d4.1k/checkpoints/step_14"}},
        metrics=recs(15, 17, 4.7, 1e-4),
    )
    write_run(
        runs / "other" / "solo",
        config={"train": {"steps": 4}},
        metrics=recs(2, 4, 5.0, 1e-3),
        summary={"status": "done", "steps": 4},
    )
    outside = tmp_path / "elsewhere" / "parent"
    write_run(
        runs / "other" / "orphan",
        config={"train": {"steps": 8}},
        metrics=recs(5, 8, 5.0, 1e-3),
        summary={"status": "done", "steps": 8, "init_from": {"run": str(outside), "step": 4}},
    )
    return TestClient(create_app(runs, None, refresh_s=0))


def test_runs_table_shows_each_branch_parent_and_step(client):
    d = client.get("/api/runs").json()
    assert d["columns"][d["columns"].index("run") + 1 : d["columns"].index("run") + 3] == ["branch_of", "branch_step"]
    rows = {r["id"]: r for r in d["runs"]}
    assert (rows["w/n50k-d2.05k"]["branch_of"], rows["w/n50k-d2.05k"]["branch_step"]) == ("w/n50k-stable", 6)
    assert (rows["w/n50k-d4.1k"]["branch_of"], rows["w/n50k-d4.1k"]["branch_step"]) == ("w/n50k-stable", 13)
    assert (rows["w/n50k-d4.1k-again"]["branch_of"], rows["w/n50k-d4.1k-again"]["branch_step"]) == ("w/n50k-d4.1k", 14)
    assert rows["w/n50k-d4.1k-again"]["status"] == "pending"
    assert rows["w/n50k-stable"]["branch_of"] is None and rows["other/solo"]["branch_of"] is None
    # a parent outside the served root: its folder name only, never the server path
    assert (rows["other/orphan"]["branch_of"], rows["other/orphan"]["branch_served"]) == ("parent", False)
    assert all("init_from" not in r for r in d["runs"])
    csv = client.get("/api/runs.csv").text.splitlines()
    assert csv[0].split(",")[3:5] == ["branch_of", "branch_step"] and any(",w/n50k-stable,13," in ln for ln in csv)


def test_curves_bring_the_family_with_join_points(client):
    plain = client.get("/api/curves", params={"run": "w/n50k-d2.05k"}).json()["runs"]
    assert [r["id"] for r in plain] == ["w/n50k-d2.05k"]  # without `branches`: what was asked
    for ask in ("w/n50k-stable", "w/n50k-d2.05k", "w/n50k-d4.1k-again"):
        got = client.get("/api/curves", params={"run": ask, "branches": 1}).json()["runs"]
        assert [r["id"] for r in got] == ["w/n50k-stable", "w/n50k-d2.05k", "w/n50k-d4.1k", "w/n50k-d4.1k-again"], ask
        assert [r["requested"] for r in got] == [r["id"] == ask for r in got]
        assert {r["family"] for r in got} == {"w/n50k-stable"}
    by = {r["id"]: r for r in got}
    assert by["w/n50k-stable"]["join"] is None and by["w/n50k-stable"]["branch_of"] is None
    # the join is the parent's last logged point at or before the branch step (logged every 2 steps)
    ser = by["w/n50k-stable"]["series"]
    stable = {s: i for i, s in enumerate(ser["step"]) if ser["loss"][i] is not None}
    for rid, point, joined, val in (("w/n50k-d2.05k", 6, 6, 4), ("w/n50k-d4.1k", 13, 12, 12)):
        r = by[rid]
        assert (r["branch_of"], r["branch_step"]) == ("w/n50k-stable", point)
        j = r["join"]["loss"]
        assert j["step"] == joined and j["tokens"] == joined * TPS and r["join"]["lr"]["step"] == joined
        assert j["loss"] == by["w/n50k-stable"]["series"]["loss"][stable[joined]]
        # per curve: the validation loss joins at the stable run's last evaluation before the branch point
        assert r["join"]["val_loss"]["step"] == val and r["join"]["val_loss"]["val_loss"] == pytest.approx(
            5.5 - val / 100
        )
        assert r["series"]["step"][0] == point + 1  # the branch's own records start after its branch point
    again = by["w/n50k-d4.1k-again"]
    assert again["branch_of"] == "w/n50k-d4.1k" and again["join"]["loss"]["step"] == 14
    assert again["join"]["loss"]["loss"] == pytest.approx(4.9 - 0.14) and again["join"]["val_loss"] is None
    # other runs keep to themselves; a parent outside the root brings nothing
    two = client.get("/api/curves", params={"run": ["other/solo", "other/orphan"], "branches": 1}).json()["runs"]
    assert [(r["id"], r["family"], r["join"]) for r in two] == [
        ("other/solo", "other/solo", None),
        ("other/orphan", "other/orphan", None),
    ]
