"""Each config key's role is field metadata (base/roles.py); the trainer's resume check, the branch
check and the sweep's run identity read their key lists off the schema, and one parser reads
`key=value` for train overrides and sweep specs."""

from __future__ import annotations

import pytest

from base.config_files import parse_key_value, parse_override
from base.roles import RESUMABLE, covered, keys_with
from pretrain.config.roles import (
    bookkeeping_keys,
    branch_keys,
    changed,
    path_keys,
    resumable_keys,
    sweep_axis_labels,
)
from pretrain.config.schema import TrainConfig
from pretrain.errors import ConfigError

# The lists pretrain/cli.py and pretrain/config/init_from.py kept by hand at ddc73a7.
RESUMABLE_AT_DDC73A7 = {
    "wandb", "train.log_every_steps", "train.eval_every_steps", "train.checkpoint_every_steps",
    "train.keep_checkpoints", "train.threads", "train.deterministic", "train.device_peak_flops", "extras", "name",
    "eval", "train.max_epochs_warn", "data.workers", "data.tasks", "data.shard_tokens", "train.nonfinite_grad",
    "train.max_skipped_steps", "train.checkpoint_at_steps", "train.activation_checkpointing",
    "train.activation_checkpointing_k", "deepspeed.zero_init",
}  # fmt: skip
# Added since: the collective timeout (a setting of the cluster, not of the run).
RESUMABLE_ADDED = {"train.dist_timeout_s"}
BRANCH_AT_DDC73A7 = {
    "model",
    "data",
    "optim",
    "train.global_batch_size",
    "train.seed",
    "precision",
    "deepspeed.zero_stage",
}
IGNORED_ON_BRANCH_AT_DDC73A7 = {"data.workers", "data.shard_tokens", "model.vocab_size", "model.preset"}
# launch/sweep/naming.py's hand-kept ALIASES at ddc73a7 (run names: lr3e-3, d1m, ...).
ALIASES_AT_DDC73A7 = {
    "optim.lr": "lr", "train.tokens": "d", "train.steps": "steps", "train.global_batch_size": "b",
    "train.micro_batch_size": "mb", "train.seed": "s", "optim.weight_decay": "wd", "schedule.name": "",
    "optim.name": "", "model.seq_len": "T", "model.moe.num_experts": "e", "model.moe.top_k": "k",
    "model.d_model": "d_model", "model.n_layers": "L",
}  # fmt: skip


def test_the_role_lists_read_off_the_schema_are_the_hand_kept_ones():
    assert resumable_keys() == RESUMABLE_AT_DDC73A7 | RESUMABLE_ADDED
    assert branch_keys() == BRANCH_AT_DDC73A7
    assert {k for k in bookkeeping_keys() if covered(k, branch_keys())} == IGNORED_ON_BRANCH_AT_DDC73A7
    assert path_keys() == {"data.out_dir"}
    assert keys_with(TrainConfig, RESUMABLE) == resumable_keys()
    assert sweep_axis_labels() == ALIASES_AT_DDC73A7


def test_run_names_use_the_schema_s_axis_labels():
    from launch.sweep.naming import axis_label, model_label

    assert axis_label("optim.lr", 0.003) == "lr3e-3" and axis_label("train.tokens", 1e6) == "d1m"
    assert axis_label("optim.name", "muon") == "muon" and axis_label("optim.beta2", 0.99) == "beta20.99"
    assert model_label({"d_model": 64, "n_layers": 2, "moe": {"num_experts": 4, "top_k": 1}}) == "d_model64-L2-e4k1"


def test_a_role_on_a_section_covers_its_keys_and_only_them():
    assert covered("wandb.project", resumable_keys()) and covered("optim.lr", branch_keys())
    assert not covered("train.tokens", resumable_keys()) and not covered("datasets", branch_keys())


def test_changed_flattens_both_configs_and_keeps_what_the_role_filter_keeps():
    old = {"optim": {"lr": 1e-3, "beta1": 0.9}, "train": {"log_every_steps": 10}, "extras": {}}
    new = {"optim": {"lr": 2e-3, "beta1": 0.9}, "train": {"log_every_steps": 5}, "extras": {"a": 1}}
    assert changed(old, new) == [
        ("extras", {}, None),
        ("extras.a", None, 1),
        ("optim.lr", 1e-3, 2e-3),
        ("train.log_every_steps", 10, 5),
    ]
    assert changed(old, new, lambda k: not covered(k, resumable_keys())) == [("optim.lr", 1e-3, 2e-3)]


@pytest.mark.parametrize(
    "item, key, value",
    [
        ("optim.lr=0.001", "optim.lr", 0.001),
        ("model=small", "model", "small"),
        ("data.name=", "data.name", ""),
        ("set.data.name=a=b", "set.data.name", "a=b"),
        ("axes.lr=[1, 2]", "axes.lr", [1, 2]),
        ("x.y=: bad: yaml", "x.y", ": bad: yaml"),  # not YAML: kept as text
    ],
)
def test_one_key_value_parser(item, key, value):
    assert parse_key_value(item) == (key, value)


@pytest.mark.parametrize("item, why", [("optim.lr", "must look like key.sub=value"), ("a..b=1", "empty key")])
def test_a_bad_key_value_is_named(item, why):
    with pytest.raises(ConfigError, match=why):
        parse_override(item)


def test_a_sweep_spec_reads_its_set_list_and_set_edits_with_the_same_parser():
    from launch.sweep.spec import edit_spec, parse_spec

    spec = parse_spec(
        {
            "name": "s",
            "base": "configs/train/tiny.yaml",
            "kind": "grid",
            "axes": {"train.seed": [0]},
            "set": ["optim.lr=0.001", "data.name="],
        }
    )
    assert spec.set == {"optim.lr": 0.001, "data.name": ""}
    assert edit_spec({"set": {}}, ["set.train.seed=3"])["set"] == {"train.seed": 3}
    with pytest.raises(ValueError, match="entry 'optim.lr' must look like key.sub=value"):
        parse_spec(
            {
                "name": "s",
                "base": "configs/train/tiny.yaml",
                "kind": "grid",
                "axes": {"train.seed": [0]},
                "set": ["optim.lr"],
            }
        )
    with pytest.raises(ConfigError, match="spec override 'runs_dir' must look like key.sub=value"):
        edit_spec({}, ["runs_dir"])
