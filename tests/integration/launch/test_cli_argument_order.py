"""Options and `key=value` overrides in the order people type them, in every `scalelab` command that takes
overrides (base.cli.ArgumentParser: argparse's intermixed parsing, inherited by every subcommand's parser).
Each test puts options between the positionals and the overrides, where plain argparse stopped with
"unrecognized arguments", and checks that the overrides took effect. In process, no training: seconds."""

from __future__ import annotations

import argparse
import json

import pytest
import yaml

from base.cli import ArgumentParser
from launch.cli import build_parser
from tests.helpers import REPO, requires_corpus, scalelab

TINY = REPO / "configs" / "train" / "tiny.yaml"
BS_LR = REPO / "configs" / "sweeps" / "bs-lr-125m.yaml"

# the commands that take `key=value` overrides, each with its test below; a new one fails
# test_every_command_intermixes_and_those_with_overrides_are_tested until it has a test here
SWEEP_ACTIONS = ("plan", "launch", "status", "cancel", "eval")  # each edits its spec with --set KEY=VALUE
OVERRIDE_COMMANDS = {"train", "config", "data prepare", "predict-curve", "quickstart"} | {
    f"sweep {a}" for a in SWEEP_ACTIONS
}


def leaf_parsers(parser: argparse.ArgumentParser, prefix: str = ""):
    """(command, parser) for every command that runs (a parser without subcommands)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix.strip(), parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from leaf_parsers(sub, f"{prefix} {name}")


def takes_overrides(parser: argparse.ArgumentParser) -> bool:
    return any(a.dest in ("overrides", "spec_overrides") for a in parser._actions)


def test_every_command_intermixes_and_those_with_overrides_are_tested():
    leaves = dict(leaf_parsers(build_parser()))
    assert len(leaves) > 20  # fit's laws, plan, train, data prepare, sweep's actions, ...
    for name, parser in leaves.items():
        assert isinstance(parser, ArgumentParser) and parser._can_intermix(), name
    assert {name for name, p in leaves.items() if takes_overrides(p)} == OVERRIDE_COMMANDS


def test_train_takes_overrides_after_options(tmp_path):
    run = tmp_path / "run"
    r = scalelab(
        "train", TINY, "--dry-run", "--run-dir", run, "train.tokens=1e6", "--world-size", "1", "model.n_layers=2"
    )
    assert r.returncode == 0, r.stderr
    assert "n_layers 2" in r.stdout and "245 steps of 4,096 tokens" in r.stdout  # 1e6 tokens / 4,096 per step
    assert not run.exists()  # a dry run writes nothing
    r = scalelab("train", TINY, "--dry-run", "train.tokens=1e6", "--run-dir", run, "model.n_layrs=2")
    assert r.returncode == 2 and "model.n_layrs" in r.stderr  # a misspelt key is still named, in any position


def test_config_show_takes_overrides():
    r = scalelab("config", "show", TINY, "train.tokens=1e6", "model.n_layers=2")
    assert r.returncode == 0, r.stderr
    cfg = yaml.safe_load(r.stdout)
    assert cfg["train"]["tokens"] == 1e6 and cfg["model"]["n_layers"] == 2


def test_data_prepare_takes_overrides_after_options(tmp_path):
    (tmp_path / "txt").mkdir()
    for name in ("a", "b"):
        (tmp_path / "txt" / f"{name}.txt").write_text(
            "\n\n".join(f"{name} paragraph {i}: some words to tokenize." for i in range(30))
        )
    config = tmp_path / "small.yaml"
    config.write_text(
        yaml.safe_dump(
            {"root": str(tmp_path), "sources": ["txt/*.txt"], "doc_chars": 200, "tokenizer": {"kind": "bpe"}}
        )
    )
    out = tmp_path / "prepared"
    r = scalelab(
        "data", "prepare", config, "--tasks", "1", f"data.out_dir={out}", "--force", "tokenizer.vocab_size=280",
        cwd=tmp_path, unset=("SCALELAB_DATA_ROOT",), timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (out / "meta.json").is_file() and "vocab 280" in r.stdout


def test_predict_curve_takes_overrides_after_options(tmp_path):
    from scaling.fits.lr_annealing.fit import fit_lr_annealing
    from tests.unit.scaling.test_lr_annealing import PEAK, T, table

    fit = tmp_path / "fit.json"
    fit_lr_annealing(table(seed=8), bootstrap=0).save(fit)
    r = scalelab(
        "predict-curve", fit, TINY, "train.tokens=null", "--json", f"train.steps={T}", "--ci", "0.9",
        f"optim.lr={PEAK}", "--out", tmp_path / "curve.csv", "schedule.name=wsd",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["steps"] == T
    assert len((tmp_path / "curve.csv").read_text().splitlines()) == T + 1  # a header and one row per step


def test_quickstart_takes_overrides_in_any_position(tmp_path):
    # quickstart has no options; its overrides follow the config, or stand alone (the default config):
    # a value it refuses exits 2 naming the key before any step runs
    for args in ([REPO / "configs" / "quickstart.yaml", f"out={tmp_path}", "seed=x"], [f"out={tmp_path}", "seed=x"]):
        r = scalelab("quickstart", *args)
        assert r.returncode == 2 and "seed" in r.stderr, r.stderr
    assert not any(tmp_path.iterdir())


@requires_corpus
@pytest.mark.parametrize("action", SWEEP_ACTIONS)
def test_sweep_takes_set_before_and_after_the_spec(action, work):
    """--set before the spec, after it, between the other options: the same edited spec. plan and launch
    refuse the run a micro-batch of 8 makes impossible, before anything is queued; status, cancel and eval
    look for the run in the runs_dir that --set names (an empty folder: pending, nothing to cancel or evaluate)."""
    run = "gpt-125m-b64-lr6e-4"
    edit = ["--set", f"runs_dir={work}"] + (
        ["--set", "set.train.micro_batch_size=8"] if action in ("plan", "launch") else []
    )
    extra = {"launch": ["--dry-run", "--executor", "slurm"], "eval": ["--dry-run"]}.get(action, [])
    outputs = []
    for args in (
        [BS_LR, "--only", run, *edit, *extra],
        [*edit, BS_LR, *extra, "--only", run],
        ["--only", run, BS_LR, *extra, *edit],
    ):
        r = scalelab("sweep", action, *args, env={"WANDB_API_KEY": "x" * 40}, timeout=300)
        if action in ("plan", "launch"):
            assert r.returncode == 2 and run in r.stderr and "nothing was queued" in r.stderr, r.stderr
        else:
            assert r.returncode == 0, r.stderr
        outputs.append(r.stdout + r.stderr)
    assert outputs[0] == outputs[1] == outputs[2]
    if action == "status":
        assert f"{run}  pending" in outputs[0]
    assert not any(work.iterdir())  # nothing written, whatever the order
