"""One compute convention and one N kind per fit record, used by sweeps, approach 2, plan and the
emitted config; data repetition seen by the fits and the plan."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaling import InputError, fit_chinchilla
from scaling.core.conventions import TokenCost
from scaling.fits.record import FitRecord
from scaling.planning.plan import make_plan
from tests.helpers import isoflop_truth, k_trainer, write_isoflop_tree

TRUE = isoflop_truth()


def test_fit_takes_the_sweeps_convention_and_records_it(tmp_path):
    runs = write_isoflop_tree(tmp_path)
    rec = fit_chinchilla(runs, n_kind="non_embedding", approach=2)
    conv = rec["conventions"]
    assert conv["compute"] == "trainer_flops" and conv["n_kind"] == "non_embedding"
    assert "non_embedding_params" in conv["n_source"]
    assert rec["diagnostics"]["n_budgets"] == 3
    for b in rec["diagnostics"]["budgets"]:
        # D_opt = C / k(N_opt) with the trainer's k, not C / (6 N_opt)
        assert b["D_opt"] * k_trainer(b["N_opt"]) == pytest.approx(b["C"], rel=0.03)
        assert b["D_opt"] * 6 * b["N_opt"] / b["C"] < 0.8
    assert "compute = trainer_flops" in FitRecord(rec).summary()


def test_a_flops_column_that_differs_from_6ND_is_not_mixed_with_6ND(tmp_path):
    runs = write_isoflop_tree(tmp_path)
    # counting compute as 6 N D breaks the iso-compute budgets: said, and the groups spread
    rec = fit_chinchilla(runs, n_kind="non_embedding", compute_kind="6ND_nonembed")
    assert rec["conventions"]["compute"] == "6ND_nonembed"
    assert any("not iso-compute" in w for w in rec["warnings"])
    assert rec["data_range"]["C"][0] < 0.5e13  # 6 N D of the smallest runs is far below their trainer budget
    with pytest.raises(InputError, match="trainer_flops needs a 'flops' column"):
        fit_chinchilla(
            pd.DataFrame({"N": [1e6] * 6, "D": np.geomspace(1e8, 1e9, 6), "loss": np.linspace(3, 2.5, 6)}),
            compute_kind="trainer_flops",
        )


def test_approach3_optimum_under_trainer_flops_is_numeric_and_consistent(tmp_path):
    runs = write_isoflop_tree(tmp_path)
    rec = fit_chinchilla(runs, n_kind="non_embedding", top_k=8, at_compute=[1e15])
    cost = TokenCost.from_record(rec)
    assert not cost.exact and cost(1e5) == pytest.approx(k_trainer(1e5), rel=0.02)
    row = next(r for r in rec["derived"] if r["C"] == 1e15)
    # on the constraint C = k(N) D, and no other N on it does better
    assert row["D_opt"] * k_trainer(row["N_opt"]) == pytest.approx(1e15, rel=0.03)
    law = rec.law()
    ns = np.geomspace(row["N_opt"] / 3, row["N_opt"] * 3, 41)
    assert law.predict(row["N_opt"], row["D_opt"]) <= law.predict(ns, 1e15 / cost(ns)).min() + 1e-9


def test_n_kind_is_honoured_for_tables_and_embeddings_warned(tmp_path):
    n_ne = np.geomspace(1e4, 1e6, 6).repeat(3)
    D = np.tile([1e7, 3e7, 1e8], 6)
    df = pd.DataFrame({"params": n_ne + 5e4, "non_embedding_params": n_ne, "D": D, "loss": TRUE.predict(n_ne, D)})
    path = tmp_path / "runs.csv"
    df.to_csv(path, index=False)
    ne = fit_chinchilla(str(path), n_kind="non_embedding", top_k=8)
    assert ne["conventions"]["n_kind"] == "non_embedding" and "non_embedding_params" in ne["conventions"]["n_source"]
    assert ne["params"]["alpha"] == pytest.approx(TRUE.alpha, abs=0.01)
    tot = fit_chinchilla(str(path), n_kind="total", top_k=8)
    assert tot["conventions"]["n_source"] == "column 'params'"
    assert abs(tot["params"]["alpha"] - TRUE.alpha) > 0.05  # the wrong N distorts the exponent
    assert any("embeddings are over half the parameters" in w for w in ne["warnings"])


def test_repeated_data_warns_in_fit_and_plan(tmp_path):
    runs = write_isoflop_tree(tmp_path, unique=2e6)
    rec = fit_chinchilla(runs, n_kind="non_embedding", top_k=8, bootstrap=4)
    assert any("repeated their training data more than 4 times" in w for w in rec["warnings"])
    assert rec["data"]["unique_tokens"] == 2e6
    plan = make_plan([rec], 5e14, vocab_size=512)
    assert plan["run"]["epochs"] == pytest.approx(plan["run"]["tokens"] / 2e6)
    assert any("would see its" in w and "unique training tokens" in w for w in plan["warnings"])


def test_isoflop_sweep_spends_each_budget_in_its_convention(tmp_path):
    from launch.sweep.expand import expand
    from launch.sweep.spec import SweepSpec

    raw = {
        "name": "iso",
        "base": "configs/train/tiny.yaml",
        "kind": "isoflop",
        "runs_dir": str(tmp_path),
        "set": {
            "model.seq_len": 128,
            "data.tokenizer.vocab_size": 512,
            "train.global_batch_size": 8,
            "train.micro_batch_size": 8,
        },
        "isoflop": {"budgets": [1e12], "models": ["n25k", "n100k"], "min_steps": 1},
    }
    for compute, n_of in (("trainer_flops", None), ("6ND_total", "params"), ("6ND_nonembed", "non_embedding_params")):
        plan = expand(SweepSpec.model_validate({**raw, "isoflop": {**raw["isoflop"], "compute": compute}}))
        for r in plan.runs:
            assert r.axes["compute"] == compute
            spent = r.flops if n_of is None else 6 * getattr(r, n_of) * r.tokens
            assert spent == pytest.approx(1e12, rel=0.01)  # tokens round up to whole steps


def test_embedding_dominated_runs_can_be_left_out(tmp_path):
    runs = write_isoflop_tree(tmp_path)
    full = fit_chinchilla(runs, n_kind="non_embedding", top_k=8)
    rec = fit_chinchilla(runs, n_kind="non_embedding", top_k=8, max_embedding_fraction=0.6)
    # the tree's smallest size (10k) carries a 30k embedding: 75% of its parameters; the next 58%
    assert rec["n_points"] == full["n_points"] - 3 and rec["settings"]["max_embedding_fraction"] == 0.6
    assert any(
        w.startswith("left out 3 of 21 runs whose embeddings exceed 60%") and "up to 75%" in w for w in rec["warnings"]
    )
    with pytest.raises(InputError, match="needs params and non_embedding_params"):
        fit_chinchilla(
            pd.DataFrame({"N": np.geomspace(1e6, 1e8, 6), "D": 1e9, "loss": np.linspace(3, 2.5, 6)}),
            max_embedding_fraction=0.5,
        )


def test_anchors_are_fitted_by_approach3_left_out_of_approach2_and_the_plan_multiplies_the_largest_budget(tmp_path):
    """isoflop.anchors (data-rich runs without a budget): approach 3 fits them with the profiles and
    recovers the law; approach 2 leaves them out and says so; `plan`'s budget is a multiple of the
    largest IsoFLOP budget, not of the (larger) anchors' compute, which the extrapolation factor counts."""
    from scaling.planning.plan import budget

    anchors = [(3e4, 3e10), (1e5, 2e10)]  # C = k(N) D: 1.2e16 and 2e16, above the 1.6e14 budget
    runs = write_isoflop_tree(tmp_path, anchors=anchors)
    a2 = fit_chinchilla(runs, n_kind="non_embedding", approach=2)
    assert a2["n_points"] == 21 and a2["diagnostics"]["n_budgets"] == 3
    assert any(w.startswith("left out 2 run(s) without an IsoFLOP budget") for w in a2["warnings"])
    a3 = fit_chinchilla(runs, n_kind="non_embedding", top_k=8)
    assert a3["n_points"] == 23
    for k in ("E", "alpha", "beta"):
        assert a3["params"][k] == pytest.approx(getattr(TRUE, k), rel=1e-3)
    lo, hi = a3["data_range"]["C_budgets"]
    assert hi == pytest.approx(1.6e14, rel=1e-6) and a3["data_range"]["C"][1] == pytest.approx(
        k_trainer(1e5) * 2e10, rel=1e-6
    )
    assert budget(FitRecord(a3), 10) == pytest.approx(1.6e15, rel=1e-6)
    plan = make_plan([a3], budget(FitRecord(a3), 10), vocab_size=512)
    assert (
        plan["extrapolation_factor"] == pytest.approx(1.6e15 / (k_trainer(1e5) * 2e10), rel=1e-6)
        and plan["extrapolation_factor"] < 1
    )
    # without anchors the record has no C_budgets and the budget is a multiple of the largest run
    plain = fit_chinchilla(write_isoflop_tree(tmp_path / "plain"), n_kind="non_embedding", top_k=8)
    assert "C_budgets" not in plain["data_range"] and budget(FitRecord(plain), 10) == pytest.approx(1.6e15, rel=1e-6)
