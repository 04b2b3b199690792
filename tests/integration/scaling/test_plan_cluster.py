"""`scalelab plan` at cluster scale (issue: plans for real clusters): on the fit of Epoch's Chinchilla
data the plan designs a dense model at N_opt, spends the budget asked, prices that run, lays it out
on the devices and writes a config and a one-run Slurm sweep that the tools accept."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.helpers import epoch_csv, scalelab

C = 5.76e23  # Chinchilla's own budget (Hoffmann et al. 2022: 70B parameters, 1.4T tokens)
A100_BF16 = 312e12


@pytest.fixture(scope="module")
def epoch_fit(tmp_path_factory):
    out = tmp_path_factory.mktemp("epoch") / "fit.json"
    res = scalelab(
        "fit",
        "chinchilla",
        epoch_csv(),
        "--col",
        "N=Model Size",
        "--col",
        "flops=Training FLOP",
        "--drop-highest",
        "5",
        "--out",
        out,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return out


def plan(fit, tmp_path, *args):
    out = tmp_path / "plan.json"
    res = scalelab("plan", "--fit", fit, "--vocab-size", "32000", *args, "--out", out, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(out.read_text()), res.stdout


def test_the_planned_run_is_a_dense_model_at_n_opt_that_spends_the_budget(epoch_fit, tmp_path):
    p, out = plan(
        epoch_fit,
        tmp_path,
        "--compute",
        str(C),
        "--device",
        "a100-80gb",
        "--num-devices",
        "1024",
        "--mfu",
        "0.45",
        "--emit-config",
        "run.yaml",
    )
    run = p["run"]
    assert 6.5e10 < p["N_opt"] < 8e10  # Chinchilla's answer at this budget was 70B
    assert run["preset"] is None and run["shape_rule"] == "marin" and run["model"]["moe"] is None
    assert run["params"] == pytest.approx(p["N_opt"], rel=0.02)
    assert 6 * run["params"] * run["tokens"] == pytest.approx(C)  # the fit's convention: 6 N D, total N
    # priced: the run's own trainer FLOPs (attention included) over peak x MFU
    assert p["cost"]["hardware_flops"] == pytest.approx(run["flops_per_token"] * run["tokens"])
    budget_hours = C / (A100_BF16 * 0.45) / 3600  # 1.14e6: what the user expected to read
    assert 1.0 < p["cost"]["device_hours"] / budget_hours < 1.08
    mem = p["memory"]
    assert mem["fits"] and mem["nodes"] * mem["devices_per_node"] == 1024 and mem["devices_per_node"] == 8
    assert mem["per_device_bytes"]["total"] <= 0.95 * mem["device_memory_bytes"]
    assert mem["global_batch_size"] == mem["micro_batch_size"] * mem["gradient_accumulation_steps"] * 1024
    assert "designed (marin)" in out and "layout: 128 node(s) x 8 devices" in out
    # the emitted config trains that model with that layout; the sweep spec holds the nodes
    cfg = yaml.safe_load((tmp_path / "run.yaml").read_text())
    assert {k: cfg["model"][k] for k in ("d_model", "n_layers", "d_ff")} == {
        k: run["model"][k] for k in ("d_model", "n_layers", "d_ff")
    }
    assert (
        cfg["deepspeed"]["zero_stage"] == mem["zero_stage"]
        and cfg["train"]["micro_batch_size"] == mem["micro_batch_size"]
    )
    assert cfg["train"]["global_batch_size"] == mem["global_batch_size"] and cfg["precision"] == "bf16"
    spec = yaml.safe_load((tmp_path / "run.sweep.yaml").read_text())
    assert spec["executor"]["slurm"]["nodes"] == 128 and spec["executor"]["slurm"]["gpus_per_node"] == 8
    res = scalelab("sweep", "plan", "run.sweep.yaml", cwd=tmp_path)  # 1.3T tokens of the 7 MB default corpus: refused
    assert res.returncode == 2 and "epochs over data 'default'" in res.stderr, res.stdout + res.stderr
    res = scalelab("sweep", "plan", "run.sweep.yaml", "--set", "set.data=fineweb-edu", cwd=tmp_path)
    assert res.returncode == 0 and "1 runs" in res.stdout, res.stdout + res.stderr
    # the trainer's own dry run builds it on the meta device and agrees on the memory
    res = scalelab("train", "run.yaml", "--dry-run", "--world-size", "1024", "--device", "a100-80gb", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"total {run['params']:,}" in res.stdout
    assert f"total {mem['per_device_bytes']['total'] / 2**30:.2f}" in res.stdout


def test_presets_only_never_takes_an_moe_preset_for_a_dense_law(epoch_fit, tmp_path):
    p, _ = plan(epoch_fit, tmp_path, "--compute", "1e21", "--presets-only")
    assert p["run"]["preset"] and not p["run"]["preset"].startswith("moe")
    assert p["run"]["choice"] == "lowest predicted loss at this compute (presets only)"


def test_a_run_that_cannot_fit_says_what_it_needs(epoch_fit, tmp_path):
    p, out = plan(epoch_fit, tmp_path, "--compute", "1e26", "--device", "l4", "--num-devices", "8", "--mfu", "0.4")
    assert p["memory"]["fits"] is False and p["memory"]["zero_stage"] == 3
    assert p["memory"]["activation_checkpointing"] == "full" and p["memory"]["micro_batch_size"] == 1
    assert "tensor or pipeline parallelism" in p["memory"]["reason"] and "layout: does not fit" in out
    assert any("does not fit on 8 x l4" in w for w in p["warnings"])


def test_a_given_model_is_priced_and_laid_out_without_a_fit(tmp_path):
    model = {
        "model": {
            "d_model": 8192,
            "n_layers": 80,
            "n_heads": 64,
            "n_kv_heads": 8,
            "d_ff": 28672,
            "vocab_size": 32000,
            "seq_len": 4096,
        }
    }  # Llama-2 70B
    (tmp_path / "llama2-70b.yaml").write_text(yaml.safe_dump(model))
    out = tmp_path / "plan.json"
    res = scalelab(
        "plan",
        "--model",
        "llama2-70b.yaml",
        "--tokens",
        "2e12",
        "--device",
        "a100-80gb",
        "--num-devices",
        "2048",
        "--mfu",
        "0.4",
        "--out",
        out,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    p = json.loads(out.read_text())
    assert p["run"]["params"] == 68_976_648_192  # Llama-2 70B counted exactly from its shape
    assert p["cost"]["hardware_flops"] == pytest.approx(p["run"]["flops_per_token"] * 2e12)
    assert p["cost"]["device_hours"] == pytest.approx(p["cost"]["hardware_flops"] / (A100_BF16 * 0.4 * 3600))
    assert p["memory"]["fits"] and "N_opt" not in p
    bad = scalelab("plan", "--model", "llama2-70b.yaml", "--device", "a100-80gb", cwd=tmp_path)
    assert bad.returncode == 2 and "--model CONFIG.yaml and --tokens D go together" in bad.stderr
