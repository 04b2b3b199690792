"""`scalelab plan FIT_moe.json --compute C`: the best (N_active, E, G, D) under a law with a known
optimum, the dense optimum and gain beside it, the emitted MoE config, and what is refused."""

from __future__ import annotations

import pytest
import yaml

from models.config import ModelConfig
from scaling.fits.moe.fit import fit_moe
from scaling.laws.moe import CLARK_2022_SBASE, KRAJEWSKI_2024
from scaling.planning.moe_plan import make_moe_plan
from scaling.synthetic.moe import clark_table, krajewski_table
from tests.helpers import REPO

C = 1e21


@pytest.fixture(scope="module")
def krajewski_fit(tmp_path_factory):
    """The published law sampled without noise on G in {2, 4, 8} (E = 8 G experts, top-G) plus dense runs."""
    # 8 starts: the same optimum as the default 32 (to 1e-9) at a third of the time; the plan only reads the fit
    rec = fit_moe(krajewski_table(noise=0.0, granularities=(2, 4, 8)), top_k=8)
    path = tmp_path_factory.mktemp("moe-plan") / "moe.json"
    rec.save(path)
    return rec, path


def test_plan_picks_the_known_optimum(krajewski_fit):
    rec, _ = krajewski_fit
    plan = make_moe_plan(rec, C)
    # gamma > 0: the finest granularity of the fitted range wins; G = 16 is beyond it and only warned
    assert [c["G"] for c in plan["candidates"]] == [1.0, 2.0, 4.0, 8.0]
    assert plan["G"] == 8 and plan["E"] == 64 and plan["top_k"] == 8 and plan["expansion"] == 8
    n, d = KRAJEWSKI_2024.compute_optimal(C, 8)
    assert plan["N_opt"] == pytest.approx(n, rel=1e-3) and plan["D_opt"] == pytest.approx(d, rel=1e-3)
    assert 6 * plan["N_opt"] * plan["D_opt"] == pytest.approx(C, rel=1e-9)
    assert plan["loss_at_optimum"] == pytest.approx(float(KRAJEWSKI_2024.optimal_loss(C, 8)), rel=1e-5)
    dn, dd = KRAJEWSKI_2024.compute_optimal(C, 1)
    assert plan["dense"]["N_opt"] == pytest.approx(dn, rel=1e-3) and plan["dense"]["D_opt"] == pytest.approx(
        dd, rel=1e-3
    )
    assert plan["gain"] == pytest.approx(
        float(KRAJEWSKI_2024.optimal_loss(C, 1) - KRAJEWSKI_2024.optimal_loss(C, 8)), rel=1e-3
    )
    mult = (KRAJEWSKI_2024.n_coef(1) / KRAJEWSKI_2024.n_coef(8)) ** (1 / KRAJEWSKI_2024.alpha)
    assert plan["compute_multiplier"] == pytest.approx(mult, rel=1e-3)
    # the dense law at the multiplied compute reaches the MoE's loss: what the multiplier means
    assert float(KRAJEWSKI_2024.optimal_loss(C * mult, 1)) == pytest.approx(plan["loss_at_optimum"], rel=1e-4)
    assert any("G = 16 would predict" in w for w in plan["warnings"])
    assert plan["conventions"] == {"compute": "6ND_active_nonembed", "n_kind": "active_non_embedding"}
    run = plan["run"]  # designed at the optimum: 64 experts of the dense shape's d_ff / 8, top-8, N_active = N_opt
    assert run["preset"] is None and run["shape_rule"] == "marin"
    assert run["E"] == 64 and run["top_k"] == 8 and run["moe"]["d_ff"] == round(run["model"]["d_ff"] / 8)
    assert run["N"] == pytest.approx(plan["N_opt"], rel=0.03)  # active non-embedding parameters
    assert run["compute"]["6ND_active_nonembed"] == pytest.approx(C, rel=1e-9)
    run = make_moe_plan(rec, C, presets_only=True)[
        "run"
    ]  # a preset made MoE: 64 experts of the preset's d_ff / 8, top-8
    preset = ModelConfig(**yaml.safe_load((REPO / "configs/models" / f"{run['preset']}.yaml").read_text()))
    assert run["E"] == 64 and run["top_k"] == 8 and run["moe"]["d_ff"] * 8 == preset.ffn_dim
    assert run["compute"]["6ND_active_nonembed"] == pytest.approx(C, rel=1e-9)


def test_clark_plan_keeps_the_runs_tokens_and_picks_the_expert_count():
    rec = fit_moe(clark_table(noise=0.0, experts=(1, 4, 16, 64)), law="clark")
    plan = make_moe_plan(rec, C)
    n = C / (6 * 1.3e11)
    assert plan["D_opt"] == pytest.approx(1.3e11) and plan["N_opt"] == pytest.approx(n)
    assert plan["E"] == 64  # below the cutoff N every extra decade of experts helps: the most the runs had
    assert plan["compute_multiplier"] == pytest.approx(float(CLARK_2022_SBASE.effective_params(n, 64)) / n, rel=1e-4)
    assert any("no data term" in w for w in plan["warnings"])
    assert any("E = 128 would predict" in w for w in plan["warnings"])
