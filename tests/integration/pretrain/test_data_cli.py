"""`scalelab data prepare` end to end through a subprocess: summary, reuse, exit codes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from base.config_files import PROJECT_ROOT
from tests.helpers import scalelab


def prepare(*args: str, cwd: Path):
    """`scalelab data prepare ARGS`, with no SCALELAB_DATA_ROOT (relative sources resolve from the config)."""
    return scalelab("data", "prepare", *args, cwd=cwd, unset=("SCALELAB_DATA_ROOT",), timeout=300)


@pytest.fixture
def config(tmp_path) -> Path:
    root = tmp_path / "root"
    (root / "txt").mkdir(parents=True)
    for name in ("a", "b"):
        (root / "txt" / f"{name}.txt").write_text(
            "\n\n".join(f"{name} paragraph {i}: some words to tokenize." for i in range(30))
        )
    path = tmp_path / "small.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "root": str(root),
                "sources": ["txt/*.txt"],
                "doc_chars": 200,
                "tokenizer": {"kind": "bpe", "vocab_size": 300},
            }
        )
    )
    return path


def test_prepare_prints_summary_then_reuses(config, tmp_path):
    first = prepare(str(config), "--out", "prepared", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    out = first.stdout
    assert "data 'small': built" in out and str(tmp_path / "prepared") in out
    assert "train:" in out and "val:" in out and "vocab 300" in out and "tokens" in out
    assert (tmp_path / "prepared" / "meta.json").is_file()
    second = prepare(str(config), "--out", "prepared", cwd=tmp_path)
    assert second.returncode == 0 and "reused" in second.stdout


def test_default_output_folder_is_data_name_under_cwd(config, tmp_path):
    res = prepare(str(config), "data.tokenizer.vocab_size=280", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "data" / "small" / "meta.json").is_file() and "vocab 280" in res.stdout


@pytest.mark.parametrize(
    "override, expected",
    [
        ("tokenizer.kind=foo", "data.tokenizer.kind"),
        ("bogus=1", "data.bogus: unknown key"),
        ("val_fraction=0.9", "data.val_fraction"),
    ],
)
def test_bad_config_exits_2_and_writes_nothing(config, tmp_path, override, expected):
    res = prepare(str(config), override, "--out", "prepared", cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.startswith("error: ") and expected in res.stderr
    assert not (tmp_path / "prepared").exists() and not (tmp_path / "data").exists()


def test_missing_data_root_exits_2_with_origins(tmp_path):
    res = prepare(str(PROJECT_ROOT / "configs/data/default.yaml"), f"root={tmp_path / 'nowhere'}", cwd=tmp_path)
    assert res.returncode == 2
    assert (
        str(tmp_path / "nowhere") in res.stderr
        and "karpathy/char-rnn" in res.stderr
        and "nltk.downloader gutenberg" in res.stderr
    )
    assert not (tmp_path / "data").exists()
