"""Which data a notebook opens (launch.notebook_sources): the user's runs, the main job's output, published
data, the notebook's own study; and the pin the tests use so that a local quickstart/ folder is never read."""

from __future__ import annotations

import pytest

from launch.notebook_sources import find_source, study_runs, study_spec
from launch.sweep.expand import expand
from launch.sweep.spec import load_spec
from tests.helpers import write_run

EPOCH = "Epoch's Chinchilla table"


@pytest.fixture()
def env(tmp_path, monkeypatch):
    for k in ("SCALELAB_NB_SOURCE", "SCALELAB_NB_RUNS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SCALELAB_QUICKSTART", str(tmp_path / "quickstart"))
    monkeypatch.setenv("SCALELAB_NB_STUDIES", str(tmp_path / "studies"))
    return tmp_path


def _main_job(root, status="done"):
    write_run(root / "quickstart/runs/isoflop-tiny/n8k-c1e11", summary={"status": status, "params": 1, "tokens": 1})
    (root / "quickstart/fits").mkdir(parents=True, exist_ok=True)
    (root / "quickstart/fits/chinchilla-a3.json").write_text("{}")


def test_the_main_jobs_output_comes_first_when_it_has_finished_runs(env):
    _main_job(env)
    src = find_source(quickstart="isoflop-tiny", published=EPOCH)
    assert src.kind == "quickstart" and src.runs == env / "quickstart/runs/isoflop-tiny"
    assert src.fit("chinchilla-a3") == env / "quickstart/fits/chinchilla-a3.json" and src.fit("batch-lr") is None
    assert find_source(quickstart="", published=EPOCH).kind == "quickstart"  # a notebook that reads fits/ only


def test_without_finished_main_job_runs_the_published_data_then_the_study(env):
    _main_job(env, status="failed")
    assert find_source(quickstart="isoflop-tiny", published=EPOCH).kind == "published"
    src = find_source(quickstart="bs-lr-tiny", study="batch-lr", launch=False)
    assert src.kind == "study" and src.runs == study_runs("batch-lr") == env / "studies/runs/nb-batch-lr"
    assert "notebooks/studies/batch-lr.yaml" in src.note
    # a shipped spec serves as a study as it is
    assert find_source(study="wsd-tiny", launch=False).runs == env / "studies/runs/wsd-tiny"


def test_the_pin_ignores_a_local_quickstart_folder(env, monkeypatch):
    _main_job(env)
    monkeypatch.setenv("SCALELAB_NB_SOURCE", "published")
    assert find_source(quickstart="isoflop-tiny", published=EPOCH).kind == "published"
    monkeypatch.setenv("SCALELAB_NB_SOURCE", "study")
    assert find_source(quickstart="isoflop-tiny", published=EPOCH, study="batch-lr", launch=False).kind == "study"


def test_the_users_runs_win_and_a_missing_folder_is_named(env, monkeypatch):
    _main_job(env)
    mine = env / "my-sweep"
    mine.mkdir()
    src = find_source(runs=mine, quickstart="isoflop-tiny", published=EPOCH)
    assert src.kind == "runs" and src.runs == mine
    monkeypatch.setenv("SCALELAB_NB_RUNS", str(mine))
    assert find_source(quickstart="isoflop-tiny").kind == "runs"
    with pytest.raises(FileNotFoundError, match="nowhere"):
        find_source(runs=env / "nowhere")


def test_a_wrong_pin_names_the_variable_and_its_values(env, monkeypatch):
    monkeypatch.setenv("SCALELAB_NB_SOURCE", "epoch")
    with pytest.raises(
        ValueError, match="SCALELAB_NB_SOURCE='epoch': use one of auto, runs, quickstart, published, study"
    ):
        find_source(published=EPOCH)
    monkeypatch.setenv("SCALELAB_NB_SOURCE", "quickstart")
    with pytest.raises(FileNotFoundError, match="make quickstart"):
        find_source(quickstart="isoflop-tiny", published=EPOCH)


@pytest.mark.parametrize(("study", "n_runs"), [("accuracy", 7), ("batch-lr", 18), ("moe", 16), ("schedules", 3)])
def test_every_notebook_study_plans_the_runs_its_notebook_reads(study, n_runs, env):
    """The specs under notebooks/studies/ expand into the runs their notebooks count on (accuracy's 7-run ladder
    is launched by notebook 6 only without a main job: the suite runs notebook 6 on the main job's output)."""
    spec = study_spec(study)
    assert spec.parent.name == "studies"
    runs = expand(load_spec(spec, [f"runs_dir={study_runs(study)}"])).runs
    assert len(runs) == n_runs
    assert {r.run_dir.parent for r in runs} == {env / "studies/runs" / f"nb-{study}"}


def test_a_study_spec_of_ones_own_replaces_the_shipped_one(env, monkeypatch):
    mine = env / "my-specs"
    mine.mkdir()
    (mine / "schedules.yaml").write_text(study_spec("schedules").read_text().replace("name: nb-schedules", "name: s2"))
    monkeypatch.setenv("SCALELAB_NB_STUDY_SPECS", str(mine))
    assert study_spec("schedules") == mine / "schedules.yaml"
    assert study_spec("moe").parent.name == "studies"  # a study the folder lacks: the shipped spec
    src = find_source(study="schedules", launch=False)
    assert src.runs == env / "studies/runs/s2" and str(mine / "schedules.yaml") in src.note
