"""The batch/LR law through fewer than three groups: per-group optima only, said in the record and
the printed output; plan and the IsoFLOP sweep's hparams_fit do not use it as a law."""

from __future__ import annotations

import pytest

from scaling import fit_batch_lr
from scaling.fits.record import has_exponents
from scaling.synthetic.runs import batch_lr_sweep


def test_two_budgets_give_optima_not_exponents(tmp_path):
    df = batch_lr_sweep(budgets=(1e15, 1e16), noise=0.0)
    rec = fit_batch_lr(df, bootstrap=20)
    assert rec["params"] == {} and rec["intervals"] == {} and rec["objective"] is None and not has_exponents(rec)
    assert rec["settings"]["exponents"].startswith("not fitted: 2 compute budgets (exponents need 3 or more)")
    groups = rec["diagnostics"]["groups"]
    assert [g["C"] for g in groups] == [pytest.approx(1e15), pytest.approx(1e16)]
    truth = batch_lr_sweep(budgets=(1e15,), lr_mults=(1,), bs_mults=(1,), noise=0.0).iloc[0]
    assert groups[0]["opt_lr"] == pytest.approx(truth["lr"])
    assert groups[0]["opt_batch_tokens"] == pytest.approx(truth["batch_tokens"])
    assert any("lr_exp_C and bs_exp_C are not identified (exponents need 3 or more groups)" in w for w in rec.warnings)
    assert any("--bootstrap skipped" in w for w in rec.warnings)
    text = rec.summary()
    assert "exponents: not fitted: 2 compute budgets" in text and "C ~ 1e+15: optimal lr" in text
    assert "lr_exp_C" not in text.split("warning")[0]
    # three budgets: the law, as before, with its residuals for prediction intervals
    law = fit_batch_lr(batch_lr_sweep(budgets=(1e15, 1e16, 1e17), noise=0.0))
    assert has_exponents(law) and law["params"]["lr_exp_C"] == pytest.approx(-0.125, abs=1e-6)
    assert law["settings"]["exponents"] == "fitted"
    assert len(law["diagnostics"]["residuals_log_lr"]) == law["diagnostics"]["n_regression_points"]
    assert "per-group optima:" in law.summary()


def test_isoflop_hparams_fit_refuses_an_optima_only_record(tmp_path):
    from types import SimpleNamespace

    from launch.sweep.expand import _hparams_law
    from pretrain.errors import ConfigError

    rec = fit_batch_lr(batch_lr_sweep(budgets=(1e15, 1e16), noise=0.0))
    path = rec.save(tmp_path / "bslr.json")
    with pytest.raises(ConfigError, match="holds no law .*exponents need 3 or more"):
        _hparams_law(SimpleNamespace(hparams_fit=str(path), compute="6ND_total"))
