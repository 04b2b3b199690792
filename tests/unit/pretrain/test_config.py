"""Configuration errors: named key, allowed values, exit code 2, nothing written."""

from __future__ import annotations

import pytest

from pretrain.config.loader import load_train_config
from pretrain.errors import ConfigError
from tests.helpers import REPO

TINY = str(REPO / "configs/train/tiny.yaml")


@pytest.mark.parametrize(
    "override, expected",
    [
        ("model.n_heads=5", "model.n_heads=5 must divide model.d_model=64"),
        (
            "optim.lrr=0.1",
            "optim.lrr: unknown key; allowed keys: beta1, beta2, eps, grad_clip, lr, "
            "momentum, muon_adjust_lr, name, nesterov, ns_steps, weight_decay, width_lr_ref",
        ),
        ("schedule.name=exp", "schedule.name: Input should be 'cosine', 'linear', 'constant' or 'wsd'"),
        ("train.global_batch_size=20", "train.global_batch_size=20 must be a multiple of train.micro_batch_size=16"),
        ("precision=fp8", "precision: Input should be 'fp32', 'bf16' or 'fp16'"),
        ("model=n7", "model: unknown preset 'n7'; allowed:"),
        ("deepspeed.zero_stage=4", "deepspeed.zero_stage: Input should be 0, 1, 2 or 3"),
        ("optim.lr=-1", "optim.lr: Input should be greater than 0"),
        ("train.steps=10", "set exactly one of train.tokens or train.steps"),
        ("model.n_kv_heads=3", "model.n_kv_heads=3 must divide model.n_heads=4"),
    ],
)
def test_bad_values_name_the_key(override, expected):
    with pytest.raises(ConfigError) as err:
        load_train_config(TINY, [override])
    assert expected in str(err.value)


def test_width_lr_ref_scales_the_peak_lr_by_inverse_width():
    cfg = load_train_config(TINY, ["model=n100k", "optim.lr=1e-2", "optim.width_lr_ref=32"])
    assert cfg.model.d_model == 64 and cfg.peak_lr() == pytest.approx(5e-3)
    assert load_train_config(TINY, ["optim.lr=1e-2"]).peak_lr() == 1e-2  # off by default


def test_overrides_apply_on_top_of_presets():
    cfg = load_train_config(TINY, ["model=n400k", "model.n_layers=2", "optim.lr=1e-3", "train.tokens=2e6"])
    assert (cfg.model.preset, cfg.model.d_model, cfg.model.n_layers) == ("n400k", 96, 2)
    assert cfg.optim.lr == 1e-3 and cfg.train.tokens == 2_000_000
    assert cfg.total_steps() == -(-2_000_000 // (16 * 256))


def test_docs_config_reference_is_current():
    from pretrain.config.reference import END, START, reference_markdown

    text = (REPO / "docs/config-reference.md").read_text()
    block = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert block == reference_markdown(), "run: python -m pretrain.config.reference docs/config-reference.md"


def test_preset_override_rebases_the_model_and_keeps_file_keys():
    cfg = load_train_config(str(REPO / "configs/train/tiny-moe.yaml"), ["model.preset=n50k", "model.moe.d_ff=64"])
    assert (cfg.model.preset, cfg.model.d_model, cfg.model.n_layers) == ("n50k", 48, 2)  # not just a relabel
    assert cfg.model.moe.num_experts == 8 and cfg.model.moe.d_ff == 64  # the file's MoE section survives
    assert load_train_config(TINY, ["model.preset=n400k"]).model.d_model == 96


def test_keys_added_to_the_schema_later_do_not_block_resume():
    from pretrain.cli import config_differences

    cfg = load_train_config(TINY).model_dump(mode="json")
    old = {**cfg, "train": {k: v for k, v in cfg["train"].items() if k != "noise_scale_batches"}}
    assert config_differences(old, cfg) == []
    changed = {**cfg, "optim": {**cfg["optim"], "lr": 0.5}}
    assert config_differences(changed, cfg) == [f"optim.lr: 0.5 -> {cfg['optim']['lr']!r}"]
