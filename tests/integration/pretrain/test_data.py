"""Training on prepared data through the CLI (small synthetic corpora): many shards read like one,
epochs and unique tokens in the summary and metrics, the repetition warning, and a weighted
mixture with per-source token counts, exact resume and a clear tokenizer-mismatch error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import REPO, metrics, run_cli

TINY = str(REPO / "configs/train/tiny.yaml")
COMPARED = ("step", "tokens", "loss", "lr", "grad_norm", "val_loss", "val_bpb", "epoch")


def write_corpus(root: Path, tag: str, n: int = 120) -> str:
    root.mkdir(parents=True, exist_ok=True)
    words = ["river", "stone", "light", "garden", "letter", "winter", "horse", "candle", "market", "song"]
    paras = [f"{tag} {i}: " + " ".join(words[(i * k + k) % len(words)] for k in range(1, 30)) + "." for i in range(n)]
    (root / f"{tag}.txt").write_text("\n\n".join(paras))
    return f"{tag}.txt"


def data_args(root: Path, source: str, out: Path, **extra) -> list[str]:
    base = {
        "data.name": out.name,
        "data.root": str(root),
        "data.sources": f"[{source}]",
        "data.out_dir": str(out),
        "data.doc_chars": 400,
        "data.tokenizer.vocab_size": 300,
        "data.val_fraction": 0.2,
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


def train_args(**extra) -> list[str]:
    base = {
        "model": "n50k",
        "model.seq_len": 32,
        "train.tokens": "null",
        "train.steps": 12,
        "train.micro_batch_size": 4,
        "train.global_batch_size": 4,
        "train.log_every_steps": 1,
        "train.eval_every_steps": 6,
        "train.eval_tokens": 512,
        "train.checkpoint_every_steps": 6,
        "train.threads": 1,
        "wandb.mode": "disabled",
    }
    base.update(extra)
    return [f"{k}={v}" for k, v in base.items()]


def train(cwd: Path, run: str, args: list[str], env=None):
    res = run_cli(["train", TINY, *args, "--run-dir", run, "--no-progress"], cwd, env=env)
    return res


def comparable(run: Path) -> list[tuple]:
    return [tuple(r.get(k) for k in COMPARED) for r in metrics(run)]


def test_many_small_shards_train_exactly_like_one_shard(tmp_path):
    src = write_corpus(tmp_path / "root", "books")
    small_docs = {"data.doc_chars": 150}
    one = train(tmp_path, "one", [*data_args(tmp_path / "root", src, tmp_path / "d1", **small_docs), *train_args()])
    assert one.returncode == 0, one.stdout[-2000:] + one.stderr[-2000:]
    many = train(
        tmp_path,
        "many",
        [
            *data_args(tmp_path / "root", src, tmp_path / "dmany", **small_docs, **{"data.shard_tokens": 200}),
            *train_args(),
        ],
    )
    assert many.returncode == 0, many.stdout[-2000:] + many.stderr[-2000:]
    meta = json.loads((tmp_path / "dmany" / "meta.json").read_text())
    assert len(meta["splits"]["train"]["shards"]) > 20 and len(meta["splits"]["val"]["shards"]) > 3, meta["splits"]
    assert comparable(tmp_path / "one") == comparable(tmp_path / "many")  # bitwise: same windows, same held-out rows
    s = json.loads((tmp_path / "one" / "summary.json").read_text())
    unique = json.loads((tmp_path / "d1" / "meta.json").read_text())["splits"]["train"]["unique_tokens"]
    assert s["unique_tokens"] == unique and s["epochs"] == pytest.approx(s["tokens"] / unique)
    assert metrics(tmp_path / "one")[-1]["epoch"] == pytest.approx(s["epochs"])
    assert "max_epochs_warn" not in one.stdout  # well under the default limit of 4 epochs


def test_repetition_beyond_max_epochs_warns_at_start(tmp_path):
    src = write_corpus(tmp_path / "root", "small", n=30)
    args = [
        *data_args(tmp_path / "root", src, tmp_path / "d"),
        *train_args(**{"train.steps": 4, "train.checkpoint_every_steps": 0}),
    ]
    res = train(tmp_path, "warned", [*args, "train.max_epochs_warn=0.05"])  # the default (4) is tested above
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    epochs = 4 * 4 * 32 / json.loads((tmp_path / "d" / "meta.json").read_text())["splits"]["train"]["unique_tokens"]
    assert f"warning: this run plans 512 training tokens: {epochs:.1f} epochs over the training split's" in res.stdout
    assert "train.max_epochs_warn=0.05" in res.stdout


def mixture_args(tmp_path: Path) -> list[str]:
    root = tmp_path / "root"
    a, b = write_corpus(root, "alpha"), write_corpus(root, "beta", n=60)
    ok = run_cli(
        [
            "data",
            "prepare",
            str(REPO / "configs/data/default.yaml"),
            *[x.removeprefix("data.") for x in data_args(root, a, tmp_path / "A")],
        ],
        tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    shared = f"data.tokenizer.path={tmp_path / 'A' / 'tokenizer.json'}"
    ok = run_cli(
        [
            "data",
            "prepare",
            str(REPO / "configs/data/default.yaml"),
            *[x.removeprefix("data.") for x in data_args(root, b, tmp_path / "B", **{"data.tokenizer.kind": "hf"})],
            shared.removeprefix("data."),
        ],
        tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    mixture = {"alpha": {"weight": 3, "data": str(tmp_path / "A")}, "beta": {"weight": 1, "data": str(tmp_path / "B")}}
    return [f"data={json.dumps({'name': 'ab', 'mixture': mixture, 'mixture_period': 8})}"]


def test_mixture_trains_with_per_source_counts_and_resumes_exactly(tmp_path):
    mix = mixture_args(tmp_path)
    ref = train(tmp_path, "ref", [*mix, *train_args()])
    assert ref.returncode == 0, ref.stdout[-2000:] + ref.stderr[-2000:]
    recs = metrics(tmp_path / "ref")
    for r in recs:
        assert r["tokens/alpha"] + r["tokens/beta"] == r["tokens"]
    assert recs[-1]["tokens/alpha"] == 3 * recs[-1]["tokens/beta"]  # 48 samples = 6 periods of 8: exactly 3:1
    assert {"val_loss/alpha", "val_loss/beta", "val_bpb/alpha"} <= set(recs[-1])
    s = json.loads((tmp_path / "ref" / "summary.json").read_text())
    ua = json.loads((tmp_path / "A" / "meta.json").read_text())["splits"]["train"]["unique_tokens"]
    ub = json.loads((tmp_path / "B" / "meta.json").read_text())["splits"]["train"]["unique_tokens"]
    assert s["unique_tokens"] == ua + ub and s["epochs"] == pytest.approx(s["tokens"] / (ua + ub))
    assert s["epochs/alpha"] == pytest.approx(s["tokens/alpha"] / ua) and s["weight/beta"] == 0.25
    assert "mixture" in json.loads((tmp_path / "ref" / "tokenizer_meta.json").read_text())
    # a failure after the step-6 checkpoint, then the same command: the run continues as if never stopped
    bad = train(tmp_path, "resumed", [*mix, *train_args()], env={"SCALELAB_FAULT_NAN_STEP": "8"})
    assert bad.returncode == 1
    again = train(tmp_path, "resumed", [*mix, *train_args()])
    assert again.returncode == 0 and "resumed from checkpoint step_6" in again.stdout
    assert comparable(tmp_path / "resumed") == comparable(tmp_path / "ref")


def test_mixture_with_two_tokenizers_fails_before_training(tmp_path):
    root = tmp_path / "root"
    for tag in ("alpha", "beta"):
        ok = run_cli(
            [
                "data",
                "prepare",
                str(REPO / "configs/data/default.yaml"),
                *[x.removeprefix("data.") for x in data_args(root, write_corpus(root, tag), tmp_path / tag)],
            ],
            tmp_path,
        )
        assert ok.returncode == 0, ok.stderr
    mixture = {
        "alpha": {"weight": 1, "data": str(tmp_path / "alpha")},
        "beta": {"weight": 1, "data": str(tmp_path / "beta")},
    }
    res = train(tmp_path, "run", [f"data={json.dumps({'name': 'ab', 'mixture': mixture})}", *train_args()])
    assert res.returncode == 2 and "do not share one tokenizer" in res.stderr
    assert not (tmp_path / "run").exists()
