"""`plan`: the run it emits is the best preset at the budget, carries the fits' warnings and recipe,
and its loss interval is a prediction interval."""

from __future__ import annotations

import pytest
import yaml

from scaling import fit_batch_lr, fit_chinchilla
from scaling.laws.loss import ChinchillaLaw
from scaling.laws.prediction import predict_loss
from scaling.planning.emit import emit_config
from scaling.planning.plan import make_plan
from scaling.planning.run_model import model_presets
from scaling.synthetic.runs import batch_lr_sweep, chinchilla_table
from tests.helpers import write_isoflop_tree


@pytest.fixture(scope="module")
def tree_fit(tmp_path_factory):
    runs = write_isoflop_tree(tmp_path_factory.mktemp("runs"), noise=0.004)
    return fit_chinchilla(runs, n_kind="non_embedding", top_k=8, bootstrap=30)


def test_plan_picks_the_preset_with_the_lowest_predicted_loss(tree_fit):
    C = 3e14
    plan = make_plan([tree_fit], C, vocab_size=512, presets_only=True)
    run = plan["run"]
    law = tree_fit.law()
    presets = [p for p in model_presets(512, 128) if not p["moe"]]  # the recipe's sequence length; a dense law
    losses = {p["name"]: float(law.predict(p["non_embedding"], C / p["flops_per_token"])) for p in presets}
    assert run["preset"] == min(losses, key=losses.get)
    assert run["choice"] == "lowest predicted loss at this compute (presets only)"
    assert run["tokens"] * run["flops_per_token"] == pytest.approx(C)  # trainer_flops: the run spends C
    assert run["loss"] == pytest.approx(losses[run["preset"]])
    # a prediction interval (parameters + residual scatter) contains the parameter-only one
    lo, hi = run["loss_interval"]
    plo, phi = run["loss_parameter_interval"]
    assert lo <= plo <= run["loss"] <= phi <= hi and "prediction interval" in run["loss_interval_kind"]
    assert plan["conventions"] == {"compute": "trainer_flops", "n_kind": "non_embedding"}


def test_plan_designs_the_model_at_n_opt_and_spends_the_budget(tree_fit):
    C = 3e14
    plan = make_plan([tree_fit], C, vocab_size=512)
    run = plan["run"]
    # the synthetic runs name no shapes: the default rule (marin); below 1e7 parameters its grid is coarse
    assert run["preset"] is None and run["shape_rule"] == "marin" and run["choice"] == "designed at N_opt"
    assert run["N"] == pytest.approx(plan["N_opt"], rel=0.1) and run["model"]["moe"] is None
    assert run["tokens"] * run["flops_per_token"] == pytest.approx(C)  # trainer_flops: the run spends C
    assert run["loss"] == pytest.approx(float(tree_fit.law().predict(run["N"], run["tokens"])))


def test_plan_designs_in_the_family_of_the_fitted_runs(tree_fit):
    rec = type(tree_fit)(dict(tree_fit))
    shapes = [
        {"d_model": d, "n_layers": 2, "n_heads": d // 16, "n_kv_heads": None, "d_ff": None, "moe": False}
        for d in (32, 48, 64, 96)
    ]
    rec["recipe"] = {**rec["recipe"], "models": shapes}  # a two-layer ladder, heads of 16
    run = make_plan([rec], 3e14, vocab_size=512)["run"]
    assert run["shape_rule"] == "runs" and "n_layers 2 at every width" in run["shape_rule_source"]
    m = run["model"]
    assert m["n_layers"] == 2 and m["d_model"] % 16 == 0 and m["n_heads"] == m["d_model"] // 16
    assert m["d_ff"] == ((8 * m["d_model"] // 3 + 31) // 32) * 32  # the trainer's default FFN, like the runs
    named = make_plan([rec], 3e14, vocab_size=512, shape_rule="olmo-ladder")["run"]
    assert named["shape_rule"] == "olmo-ladder"


def test_emitted_config_carries_the_recipe(tree_fit, tmp_path):
    plan = make_plan([tree_fit], 3e14, vocab_size=512)
    cfg = yaml.safe_load(emit_config(plan, tmp_path / "run.yaml").read_text())
    assert cfg["schedule"] == {"name": "cosine", "warmup_fraction": 0.07, "min_lr_ratio": 0.1}
    assert cfg["optim"]["weight_decay"] == 0.05 and cfg["optim"]["lr"] == 3e-3
    m = plan["run"]["model"]
    assert cfg["model"] == {
        k: m[k] for k in ("d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "vocab_size", "tie_embeddings")
    } | {"seq_len": 128}
    assert not (tmp_path / "run.sweep.yaml").exists()  # no devices given: nothing to lay out
    assert cfg["data"]["name"] == "toy" and cfg["train"]["global_batch_size"] == 8
    assert cfg["train"]["tokens"] == round(plan["run"]["tokens"])


def test_every_fit_warning_reaches_the_plan():
    # no irreducible loss: log E runs to its bound, and the plan built on it must say so
    truth = ChinchillaLaw(E=0.0, A=480.0, B=2100.0, alpha=0.35, beta=0.37)
    rec = fit_chinchilla(chinchilla_table(truth, noise=0.0, budgets=(1e17, 1e18, 1e19)), top_k=8)
    bound = [w for w in rec.warnings if "bound" in w]
    assert bound
    plan = make_plan([rec], 1e20, vocab_size=4096)
    assert all(f"chinchilla approach 3 fit: {w}" in plan["warnings"] for w in rec.warnings)


def test_batch_lr_law_outside_its_range_is_warned(tree_fit):
    hp = fit_batch_lr(batch_lr_sweep(budgets=(1e15, 1e16, 1e17)))
    plan = make_plan([tree_fit, hp], 3e14, vocab_size=512)
    assert plan["run"]["lr"] > 0 and plan["run"]["batch_tokens"] > 0
    assert any("batch-lr law used outside the range it was fitted on" in w for w in plan["warnings"])


def test_prediction_interval_without_bootstrap_says_so():
    rec = fit_chinchilla(chinchilla_table(noise=0.01), top_k=8)
    p = predict_loss(rec, 1e9, 2e10)
    assert p["interval"][0] < p["loss"] < p["interval"][1]
    assert "parameter uncertainty not included" in p["interval_kind"]


def test_a_data_constrained_plan_counts_the_repetition_of_its_data():
    import numpy as np
    import pandas as pd

    from scaling.synthetic.runs import TRUE_DATA_CONSTRAINED as truth

    # one corpus of 1e9 unique tokens; runs from a tenth of an epoch to 30 epochs
    N, D = (a.ravel() for a in np.meshgrid(np.geomspace(1e7, 1e9, 6), np.geomspace(1e8, 3e10, 7)))
    table = pd.DataFrame({"N": N, "D": D, "U": 1e9, "loss": truth.predict(N, D, U=1e9)})
    rec = fit_chinchilla(table, law="data-constrained", top_k=8)
    assert rec["data"]["unique_tokens"] == 1e9
    plan = make_plan([rec], 3e21, vocab_size=4096)
    run = plan["run"]
    assert run["epochs"] > 4 and any("unique training tokens" in w for w in plan["warnings"])
    fresh = ChinchillaLaw(**{k: rec.params[k] for k in ("E", "A", "B", "alpha", "beta")}).predict(
        run["N"], run["tokens"]
    )
    assert run["loss"] > fresh + 0.01  # repeated tokens are worth less than new ones
    assert run["loss"] == pytest.approx(rec.law().predict(run["N"], run["tokens"], U=1e9))


def test_to_train_config_is_what_emit_config_writes_and_takes_a_base_recipe(tree_fit, tmp_path):
    from scaling.planning.emit import run_name, to_train_config
    from scaling.planning.plan import budget
    from scaling.planning.run_model import run_label

    plan = make_plan([tree_fit], budget(tree_fit, 10.0), vocab_size=512)
    assert plan["compute"] == pytest.approx(10.0 * tree_fit["data_range"]["C"][1])
    cfg = to_train_config(plan)
    assert yaml.safe_load(emit_config(plan, tmp_path / "run.yaml").read_text()) == cfg
    assert cfg["name"] == run_name(plan) == f"plan-{run_label(plan['run'])}-C{plan['compute']:.0e}".replace("+", "")
    assert run_label(plan["run"]).startswith("marin-") and run_label({"preset": "n50k"}) == "n50k"
    # another recipe: its schedule and micro-batch, the global batch rounded to a multiple of it
    base = {"schedule.name": "wsd", "train.global_batch_size": 11, "train.micro_batch_size": 4, "model.seq_len": 64}
    other = to_train_config(plan, base)
    assert other["schedule"] == {"name": "wsd"} and "optim" not in other
    assert other["model"]["seq_len"] == 64
    assert other["train"]["micro_batch_size"] == 4 and other["train"]["global_batch_size"] == 12
    assert to_train_config(plan, {}, micro_batch_size=3)["train"]["micro_batch_size"] == 3
    # runs fitted under μP: the planned run takes their parametrization and base shapes (and their lr)
    mup = {"model.parametrization": "mup", "model.mup_base_width": 16, "model.mup_base_head_dim": 8, "optim.lr": 6e-3}
    transferred = to_train_config(plan, mup)
    assert {k: transferred["model"][k] for k in ("parametrization", "mup_base_width", "mup_base_head_dim")} == {
        "parametrization": "mup",
        "mup_base_width": 16,
        "mup_base_head_dim": 8,
    }
    assert transferred["optim"]["lr"] == 6e-3
    assert "parametrization" not in to_train_config(plan, {**mup, "model.parametrization": "sp"})["model"]
