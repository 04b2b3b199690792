"""The run-directory contract (runs/): summary.json keys, order and versions, tolerant readers,
the checkpoint manifest, the file table of docs/run-directory.md, and the torch-free readers."""

from __future__ import annotations

import json
import re

import pytest

from rundir import layout
from rundir.checkpoints import complete_checkpoints, has_checkpoint
from rundir.metrics import MetricsTail, last_record, read_metrics
from rundir.read import SUMMARY_COLUMNS
from rundir.summary import SCHEMA_VERSION, RunSummary, read_summary, write_summary
from tests.helpers import REPO, write_run

# What the trainer's summary() builds (pretrain/engine/trainer.py), mixture keys from TrainFeed.summary.
TRAINER_KEYS = [
    "status",
    "name",
    "steps",
    "total_steps",
    "tokens",
    "params",
    "non_embedding_params",
    "active_params",
    "active_non_embedding_params",
    "flops_per_token",
    "flops",
    "batch_tokens",
    "batch_size",
    "lr",
    "peak_lr",
    "final_loss",
    "final_val_loss",
    "final_val_bpb",
    "tokens_per_s",
    "mfu",
    "peak_flops",
    "peak_source",
    "world_size",
    "threads",
    "deterministic",
    "wall_s",
    "eval_s",
    "skipped_steps",
    "finished_at",
    "extras",
    "epochs",
    "unique_tokens",
]


def trainer_dict(**extra) -> dict:
    d = {k: i for i, k in enumerate(TRAINER_KEYS)}
    d.update(status="done", name="r", extras={"sweep": "s", "axes": {"optim.lr": 0.01}}, deterministic=True, **extra)
    return d


def test_trainer_summary_is_written_unchanged_plus_its_version(tmp_path):
    mix = {
        "tokens/books": 10,
        "unique_tokens/books": 5,
        "epochs/books": 2.0,
        "weight/books": 0.5,
        "tokens/web": 30,
        "unique_tokens/web": 60,
        "epochs/web": 0.5,
        "weight/web": 0.5,
    }
    d = trainer_dict(**mix, error="boom")
    write_summary(tmp_path, d)
    text = (tmp_path / "summary.json").read_text()
    back = json.loads(text)
    assert list(back) == [*d, "schema_version"] and back["schema_version"] == SCHEMA_VERSION  # same keys, same order
    assert {k: back[k] for k in d} == d
    assert '\n  "status": "done",' in text  # indented as before: readable with cat
    assert not list(tmp_path.glob(".summary.json.*"))  # the temporary file was renamed over


def test_older_and_newer_summaries_read(tmp_path):
    old = {"status": "done", "steps": 3, "final_loss": 4.2, "extras": {}}
    write_run(tmp_path / "old", summary=old)
    s = RunSummary.read(tmp_path / "old")
    assert s.schema_version == 0 and s.steps == 3 and s.peak_flops is None and s.to_dict()["final_loss"] == 4.2
    newer = {**trainer_dict(), "schema_version": SCHEMA_VERSION + 1, "a_new_key": [1, 2]}
    write_run(tmp_path / "new", summary=newer)
    s = RunSummary.read(tmp_path / "new")
    assert s.other == {"a_new_key": [1, 2]} and s.to_dict()["a_new_key"] == [1, 2]
    s.write(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "summary.json").read_text())["schema_version"] == SCHEMA_VERSION + 1


def test_torn_summary_reads_as_none_or_says_why(tmp_path):
    write_run(tmp_path, summary='{"status": "do')
    assert read_summary(tmp_path) is None and RunSummary.read(tmp_path) is None
    with pytest.raises(ValueError, match="summary.json unreadable .half-written or corrupt"):
        read_summary(tmp_path, strict=True)
    write_run(tmp_path, summary="[1, 2]")
    with pytest.raises(ValueError, match="not a JSON object"):
        read_summary(tmp_path, strict=True)
    assert read_summary(tmp_path / "missing", strict=True) is None


def test_registry_columns_are_summary_fields():
    known = set(RunSummary.__dataclass_fields__)
    assert set(SUMMARY_COLUMNS) <= known, set(SUMMARY_COLUMNS) - known


def test_metrics_readers_drop_a_torn_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 5.0}\n{"step": 2, "loss": 4.9}\n{"step": 3, "lo')
    assert [r["step"] for r in read_metrics(path)] == [1, 2]
    assert last_record(path) == {"step": 2, "loss": 4.9}
    tail = MetricsTail(path)
    assert [r["step"] for r in tail.read()] == [1, 2]
    with open(path, "a") as f:
        f.write('ss": 4.8}\n')
    assert [r["step"] for r in tail.read()] == [1, 2, 3]
    assert read_metrics(tmp_path / "none.jsonl") == [] and last_record(tmp_path / "none.jsonl") is None


def test_checkpoint_manifest_counts_only_complete_ones(tmp_path):
    ck = tmp_path / "checkpoints"
    write_run(tmp_path, checkpoint=4)
    write_run(tmp_path, checkpoint=12)
    (ck / "step_16").mkdir()  # a save cut short: no COMPLETE
    (ck / "step_x").mkdir()
    (ck / "step_x" / "COMPLETE").write_text("{}")
    assert [s for s, _ in complete_checkpoints(ck)] == [4, 12]
    assert has_checkpoint(tmp_path) and not has_checkpoint(tmp_path / "nothing")
    assert layout.RunDir(tmp_path).checkpoint(12) == ck / "step_12" and layout.checkpoint_step("step_12") == 12


def test_docs_name_every_file_of_the_layout():
    """The run-directory table of docs/run-directory.md and rundir/layout.py name the same files."""
    text = (REPO / "docs/run-directory.md").read_text()
    section = text.split("# The run directory", 1)[1].split("\n#", 1)[0]
    in_readme = set()
    for row in section.splitlines():
        if row.startswith("| `"):  # first column: `file`, `folder/...`
            in_readme |= {n.split("/")[0] for n in re.findall(r"`([^`]+)`", row.split("|")[1])}
    names = {v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str)} - {layout.CHECKPOINT_PREFIX}
    inside_checkpoints = {layout.COMPLETE, layout.LATEST, layout.UNIVERSAL}
    assert names - inside_checkpoints == in_readme, (names - inside_checkpoints) ^ in_readme
    assert all(n in section for n in inside_checkpoints)


def test_run_dir_writes_the_trainers_dict_at_the_current_version(tmp_path):
    write_summary(tmp_path, trainer_dict())
    assert read_summary(layout.RunDir(tmp_path).path)["schema_version"] == SCHEMA_VERSION
    RunSummary(status="failed", steps=2, error="boom").write(tmp_path)
    back = read_summary(tmp_path)
    assert (
        back["schema_version"] == SCHEMA_VERSION
        and back["error"] == "boom"
        and list(back)[:3] == ["status", "name", "steps"]
    )


def test_the_stand_in_writer_leaves_what_the_readers_read(tmp_path):
    """rundir.write.write_run, the one writer of stand-in runs (tests, demo, synthetic data): a finished run
    with a checkpoint and an evaluation reads as done, with its checkpoint named by `latest` and its results."""
    from rundir.checkpoints import resolve_checkpoint
    from rundir.read import run_status
    from rundir.write import write_run as write

    run = write(
        tmp_path / "r",
        config={"name": "r", "model": {"d_model": 8}},
        summary={"status": "done", "steps": 3, "final_loss": 4.5},
        metrics=[{"step": s, "loss": 5.0 - s / 10} for s in range(1, 4)],
        checkpoint=3,
        evals={3: {"step": 3, "results": [{"task": "t", "metric": "acc", "value": 0.5}], "failed": []}},
    )
    assert run_status(run).state == "done"
    assert resolve_checkpoint(run)[1:] == ((run / "checkpoints" / "step_3").resolve(), 3)
    assert (run / "checkpoints" / "latest").read_text() == "step_3\n"
    assert json.loads((run / "evals" / "3.json").read_text())["results"][0]["value"] == 0.5
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl")] == [1, 2, 3]
