"""Multi-head latent attention and multi-token prediction from a model config (`model.mla`, `model.mtp_depth`):
`scalelab plan --model` prices DeepSeek-V3 as the published-runs table counts it, bad values exit 2 naming
the key, and what the trainer does not build is refused by `train` and `plan --emit-config` before any work
(issue: costs without a guessed MFU, item 4)."""

from __future__ import annotations

import json

import pytest
import yaml

from models.accounting import model_counts
from scaling.planning.published_runs import RUNS
from tests.helpers import REPO, scalelab

V3 = {  # DeepSeek-V3's config.json, as docs/config-reference.md's keys write it
    "d_model": 7168,
    "n_layers": 61,
    "n_heads": 128,
    "d_ff": 18432,
    "vocab_size": 129280,
    "seq_len": 4096,
    "moe": {"num_experts": 256, "top_k": 8, "d_ff": 2048, "num_shared_experts": 1, "first_dense_layers": 3},
    "mla": {
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    },
    "mtp_depth": 1,
}  # fmt: skip
# pre-training as published (Sec. 3.2: no TP, PP 16, EP 64, ZeRO-1; 15,360 x 4K tokens): a few layouts, ~1 s
ON_H800 = (
    "--device", "h800", "--num-devices", "2048", "--precision", "fp8", "--global-batch-tokens", str(15360 * 4096),
    "--layout", "tp=1,pp=16,ep_size=64,zero_stage=1,micro_batch_size=1",
)  # fmt: skip


def plan(tmp_path, model: dict, *args: str):
    (tmp_path / "v3.yaml").write_text(yaml.safe_dump({"model": model}))
    return scalelab(
        "plan", "--model", "v3.yaml", "--tokens", "14.8e12", *ON_H800, "--runs", str(tmp_path / "no-runs"), *args,
        cwd=tmp_path,
    )  # fmt: skip


def test_deepseek_v3_from_a_model_config_counts_as_the_published_runs_row(tmp_path):
    row = next(r for r in RUNS if r.name == "DeepSeek-V3")
    pretraining = row.parts()[0][1]  # the row's model at its 4K pre-training length
    counts = model_counts(pretraining)
    res = plan(tmp_path, V3, "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    p = json.loads(res.stdout)
    run = p["run"]
    assert run["params"] == row.params() == counts.total == 682_636_457_984  # 671B + 11.6B of MTP
    assert run["non_embedding_params"] == counts.non_embedding
    assert run["active_params"] == counts.active
    assert run["flops_per_token"] == counts.flops_per_token == 291_848_036_352.0
    # the layout search and the step-time model price the same model: latent attention and the MTP module
    assert p["performance"]["model_flops_per_token"] == counts.flops_per_token
    assert p["layout"]["fits"] and p["layout"]["trainer_runs"] is False
    assert "the trainer does not build them" in p["memory"]["reason"]
    # without the MTP module and with GQA-free Llama attention the counts differ (the keys reach the plan)
    plain = plan(tmp_path, {k: v for k, v in V3.items() if k not in ("mla", "mtp_depth")}, "--json")
    assert json.loads(plain.stdout)["run"]["flops_per_token"] < 0.9 * counts.flops_per_token


@pytest.mark.parametrize(
    "change, key",
    [
        ({"mla": {**V3["mla"], "kv_lora_rank": 0}}, "model.mla.kv_lora_rank: Input should be greater than 0"),
        ({"mla": {**V3["mla"], "qk_rope_head_dim": 63}}, "model.mla.qk_rope_head_dim=63 must be even"),
        ({"mla": {k: v for k, v in V3["mla"].items() if k != "v_head_dim"}}, "model.mla.v_head_dim: required"),
        ({"mla": {**V3["mla"], "kv_rank": 512}}, "model.mla.kv_rank: unknown key"),
        ({"n_kv_heads": 8}, "model.n_kv_heads=8 with model.mla"),
        ({"mtp_depth": -1}, "model.mtp_depth: Input should be greater than or equal to 0"),
    ],
)
def test_a_bad_mla_or_mtp_value_exits_2_naming_the_key(tmp_path, change, key):
    res = plan(tmp_path, {**V3, **change})
    assert res.returncode == 2 and key in res.stderr, res.stderr


def test_emit_config_refuses_mla_and_mtp(tmp_path):
    res = plan(tmp_path, V3, "--precision", "bf16", "--emit-config", "run.yaml")
    assert res.returncode == 2 and "--emit-config with model.mla and model.mtp_depth" in res.stderr, res.stderr
    assert "the trainer does not build" in res.stderr and not (tmp_path / "run.yaml").exists()


MLA_OVERRIDE = "model.mla={kv_lora_rank: 32, qk_nope_head_dim: 16, qk_rope_head_dim: 16, v_head_dim: 16}"


@pytest.mark.parametrize("override, dry", [(MLA_OVERRIDE, False), ("model.mtp_depth=1", False), (MLA_OVERRIDE, True)])
def test_train_refuses_mla_and_mtp_before_any_work(tmp_path, override, dry):
    key = override.split("=")[0]
    res = scalelab(
        "train", str(REPO / "configs/train/tiny.yaml"), override, "--run-dir", "run", *(["--dry-run"] if dry else []),
        cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{key}: the trainer does not build multi-head latent attention or multi-token prediction" in res.stderr
    assert "the planner prices them" in res.stderr and not (tmp_path / "run").exists()
