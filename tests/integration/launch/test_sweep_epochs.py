"""`sweep plan` shows each run's epochs over its unique training tokens and refuses runs over
train.max_epochs_warn (exit 2, nothing queued) unless --allow-repeats; the shipped GPU specs train on
a corpus large enough for them (FineWeb-Edu from the Hub: its size is unknown offline, said so)."""

from __future__ import annotations

import pytest

from launch.sweep.epochs import unique_tokens
from pretrain.data.load import load_data_config
from tests.helpers import REPO, requires_corpus, scalelab

ISO_GPU = REPO / "configs" / "sweeps" / "isoflop-125m-1.3b.yaml"
KEY = {"WANDB_API_KEY": "x" * 40}


@requires_corpus
def test_a_gpu_spec_on_the_smoke_corpus_is_refused_naming_runs_and_epochs(tmp_path):
    small = ["--set", "set.data=default-gpt2", "--set", f"runs_dir={tmp_path / 'runs'}"]
    r = scalelab("sweep", "plan", ISO_GPU, *small, env=KEY)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "12 of 12 runs would fail once queued; nothing was queued" in r.stderr
    assert (
        "run c3e19-gpt-125m: train.tokens, data: 1.8" in r.stderr
        and "epochs over data 'default-gpt2' (estimated" in r.stderr
    )
    assert "train.max_epochs_warn=4" in r.stderr and "--allow-repeats" in r.stderr
    r = scalelab("sweep", "launch", ISO_GPU, *small, "--executor", "slurm", "--dry-run", env=KEY)
    assert r.returncode == 2 and "#SBATCH" not in r.stdout
    ok = scalelab("sweep", "plan", ISO_GPU, *small, "--allow-repeats", env=KEY)
    assert ok.returncode == 0, ok.stderr
    assert "epochs over data 'default-gpt2': estimated (7.16 MB of text read" in ok.stdout
    # as shipped: FineWeb-Edu, streamed from the Hub, not sized offline and not refused
    shipped = scalelab("sweep", "plan", ISO_GPU, "--set", f"runs_dir={tmp_path / 'runs'}", env=KEY)
    assert shipped.returncode == 0, shipped.stderr
    assert "epochs over data 'fineweb-edu': unknown (streamed from HuggingFaceFW/fineweb-edu" in shipped.stdout


@requires_corpus
def test_prepared_data_gives_the_exact_epochs(tiny_data, tmp_path):
    cfg = load_data_config(
        REPO / "configs/data/default.yaml", ["tokenizer.vocab_size=512", f"out_dir={tiny_data}", "name=tiny512"]
    )
    u = unique_tokens(cfg)
    assert u.basis.startswith("exact (prepared:")
    import json

    assert u.tokens == json.loads((tiny_data / "meta.json").read_text())["splits"]["train"]["unique_tokens"]


@requires_corpus
def test_the_estimate_is_within_10_percent_of_the_prepared_count(tiny_data, tmp_path):
    """Estimated before preparing, against the prepared count: the default corpus (the session's
    prepared copy) and the Gutenberg-100 subset of dc-tiny (prepared here)."""
    import json

    from pretrain.data.prepare import prepare

    cfg = load_data_config(
        REPO / "configs/data/default.yaml", ["tokenizer.vocab_size=512", f"out_dir={tmp_path / 'x'}"]
    )
    est = unique_tokens(cfg)
    assert est.basis.startswith("estimated (") and "bytes/token by a 512-token BPE" in est.basis
    prepared = json.loads((tiny_data / "meta.json").read_text())["splits"]["train"]["unique_tokens"]
    assert est.tokens == pytest.approx(prepared, rel=0.10)
    cfg = load_data_config(REPO / "configs/data/dc-tiny.yaml", [f"out_dir={tmp_path / 'dc'}"])
    est = unique_tokens(cfg)
    prepare(cfg, log=lambda m: None)
    exact = unique_tokens(cfg)
    assert exact.basis.startswith("exact")
    assert est.tokens == pytest.approx(exact.tokens, rel=0.10)
