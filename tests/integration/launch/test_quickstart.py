"""The main job end to end from the CLI, scaled down (tiny budgets), and its idempotent rerun."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.helpers import REPO, requires_corpus, run_cli
from tests.helpers.notebooks import execute_notebook

pytestmark = [requires_corpus, pytest.mark.slow]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("qs") / "study"
    res = run_cli(["quickstart", str(REPO / "configs/quickstart-test.yaml"), f"out={out}"], REPO, timeout=1800)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return out, res


def test_every_step_produced_its_output(study):
    out, res = study
    iso = sorted(p.parent for p in (out / "runs" / "isoflop-tiny").glob("*/summary.json"))
    assert len(iso) == 10  # 9 at the budgets, one anchor
    for run in iso:
        s = json.loads((run / "summary.json").read_text())
        assert s["status"] == "done"
        ev = json.loads((run / "evals" / f"{s['steps']}.json").read_text())
        assert "tiny" in ev["suites"] and not ev["failed"]
        assert {r["task"] for r in ev["results"]} >= {"blimp_anaphor_gender_agreement", "tinyshakespeare_bpb"}
    for name in ("chinchilla-a3", "chinchilla-a2"):
        rec = json.loads((out / "fits" / f"{name}.json").read_text())
        assert rec["n_points"] >= 9 and (out / "fits" / f"{name}.png").stat().st_size > 1000
    a3 = json.loads((out / "fits" / "chinchilla-a3.json").read_text())
    assert set(a3["params"]) >= {"E", "A", "B", "alpha", "beta"} and a3["intervals"]


def test_unused_batch_lr_stage_is_skipped_and_said(study):
    """hparams_law and plan.hparams_from_fit are false: nothing uses the batch-lr law, so with
    batch_lr.run auto (the default) its sweep and fit do not run, and the log and the report say why."""
    out, res = study
    assert not (out / "runs" / "bs-lr-tiny").exists() and not (out / "fits" / "batch-lr.json").exists()
    note = "batch_lr.run: auto: nothing uses the batch-lr law (hparams_law: false, plan.hparams_from_fit: false)"
    assert "=== 2. batch-size x learning-rate sweep and law: skipped ===" in res.stdout and note in res.stdout
    report = (out / "report.md").read_text()
    assert f"Skipped: {note}" in report and "(skipped: batch_lr.run: auto" in report
    timings = json.loads((out / "timings.json").read_text())["cumulative_seconds"]
    assert not any(step.startswith("2.") for step in timings) and "3. IsoFLOP sweep" in timings
    assert "no batch-lr fit given" in json.dumps(json.loads((out / "plan" / "plan.json").read_text()))


def test_plan_was_trained_and_compared(study):
    out, res = study
    cmp = json.loads((out / "plan" / "comparison.json").read_text())
    plan = json.loads((out / "plan" / "plan.json").read_text())
    run = json.loads((Path(cmp["run"]) / "summary.json").read_text())
    assert run["status"] == "done"
    ev = json.loads(
        (Path(cmp["run"]) / "evals" / f"{run['steps']}.json").read_text()
    )  # the plan's run is evaluated too
    assert "tiny" in ev["suites"] and not ev["failed"]
    assert math.isfinite(cmp["predicted"]) and cmp["measured"] == run["final_val_loss"]
    assert cmp["rel_error"] == pytest.approx((cmp["measured"] - cmp["predicted"]) / cmp["predicted"])
    # the prediction is for the run's own N in the fit's convention, with a prediction interval
    assert cmp["n_kind"] == "non_embedding" and cmp["N"] == run["non_embedding_params"]
    assert cmp["interval"][0] <= cmp["parameter_interval"][0] and cmp["parameter_interval"][1] <= cmp["interval"][1]
    assert cmp["inside"] == (cmp["interval"][0] <= cmp["measured"] <= cmp["interval"][1])
    # the plan's budget is the configured multiple of the largest IsoFLOP budget's FLOPs (not the anchor's)
    flops = {
        p.parent.name: json.loads(p.read_text())["flops"]
        for p in (out / "runs" / "isoflop-tiny").glob("*/summary.json")
    }
    largest = max(f for name, f in flops.items() if not name.startswith("anchor-"))
    assert flops["anchor-n50k-d200k"] > largest
    assert plan["compute"] == pytest.approx(3 * largest, rel=1e-3)
    report = (out / "report.md").read_text()
    for section in ("predicted vs measured", "## Fits", "## IsoFLOP sweep", "## Plan", "scalelab dashboard --runs"):
        assert section in report
    assert "predicted loss" in res.stdout and "open the dashboard:" in res.stdout
    last = [ln for ln in res.stdout.splitlines() if ln.startswith("predicted loss")][-1]
    assert "(95% prediction interval " in last and "vs measured" in last and "relative error" in last
    # where the points came from, and what they cost (the figure issue 16 compares with WSD branches)
    assert (
        "IsoFLOP points: 10 from separate cosine runs (10: 9 at the budgets, 1 anchor)" in res.stdout
        and "points per CPU hour" in res.stdout
    )
    assert "come from separate cosine runs (10: 9 at the budgets, 1 anchor)" in report
    assert "3x the largest IsoFLOP budget" in report and "x the largest fitted run (an anchor)" in report
    a2 = json.loads((out / "fits" / "chinchilla-a2.json").read_text())
    assert a2["n_points"] == 9 and any("left out 1 run(s) without an IsoFLOP budget" in w for w in a2["warnings"])
    assert json.loads((out / "fits" / "chinchilla-a3.json").read_text())["n_points"] == 10
    assert json.loads((out / "timings.json").read_text())["cumulative_cpu_seconds"]["3. IsoFLOP sweep"] > 0
    # the plan states its verdict first; the report ends with the next sweep for 10x and its CPU cost
    assert plan["verdict"]["status"] in ("identified", "not identified at this budget")
    assert "verdict: " in report and report.index("verdict: ") < report.index("N_opt: ")
    assert "## What to run next" in report and "CPU-minutes" in report and (out / "plan" / "next.yaml").exists()


def test_rerun_reuses_everything(study):
    out, _ = study
    fits = {p: p.stat().st_mtime for p in (out / "fits").glob("*.json")}
    first = json.loads((out / "timings.json").read_text())["cumulative_seconds"]
    res = run_cli(["quickstart", str(REPO / "configs/quickstart-test.yaml"), f"out={out}"], REPO, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "evaluations up to date" in res.stdout and "already done" in res.stdout
    assert "reusing prepared data" in res.stdout
    assert {p: p.stat().st_mtime for p in (out / "fits").glob("*.json")} == fits
    # the report keeps what the study cost: the first invocation's seconds are summed in, not replaced
    both = json.loads((out / "timings.json").read_text())["cumulative_seconds"]
    assert both["3. IsoFLOP sweep"] > first["3. IsoFLOP sweep"] and both["total"] < 2 * first["total"]
    assert "| total |" in (out / "report.md").read_text() and "all invocations" in (out / "report.md").read_text()


# The notebooks on the main job's output (SCALELAB_NB_SOURCE=quickstart), as their committed outputs were made:
# this module's scaled-down job stands in for `make quickstart` (its batch x lr stage is skipped, so notebook 3
# reads its own study in tests/integration/scaling/test_notebooks.py, as do 4 and 5).
def test_fitting_notebook_on_the_main_jobs_output(study, tmp_path, monkeypatch):
    out, _ = study
    text, images = execute_notebook(
        "1_fitting_a_study", tmp_path, monkeypatch, "quickstart", SCALELAB_QUICKSTART=str(out)
    )
    assert "source: quickstart - the main job's output" in text and "isoflop-tiny" in text
    assert "scalelab predict:" in text and "held-out runs inside the 95% prediction interval" in text
    assert images == 1 and (tmp_path / "figures/fitting_approach3.png").exists()


def test_planning_notebook_on_the_main_jobs_fits(study, tmp_path, monkeypatch):
    out, _ = study
    text, images = execute_notebook(
        "2_from_law_to_decision", tmp_path, monkeypatch, "quickstart", SCALELAB_QUICKSTART=str(out)
    )
    assert f"source: quickstart - {out / 'fits' / 'chinchilla-a3.json'}" in text
    assert "N_opt:" in text and "layout:" in text and "cost: $" in text
    assert images == 1 and (tmp_path / "figures/plan_pareto.png").exists()


def test_accuracy_notebook_on_the_main_jobs_evaluated_runs(study, tmp_path, monkeypatch):
    """The chain is fitted on the 7 runs below the largest size and predicts the largest size's 3 runs
    (their evaluations are the job's own: the tiny suite, limit 5)."""
    out, _ = study
    text, images = execute_notebook(
        "6_loss_to_accuracy", tmp_path, monkeypatch, "quickstart", SCALELAB_QUICKSTART=str(out)
    )
    assert "source: quickstart - the main job's output" in text and "10 evaluated runs" in text
    assert "fitting on 7 runs" in text and "predicting 3 run(s)" in text
    assert "held-out accuracies inside their 95% prediction interval" in text
    assert images == 1 and (tmp_path / "figures/accuracy_chain.png").exists()
