"""The batch/LR law through fewer than three groups: per-group optima only, said in the record and
the printed output; plan and the IsoFLOP sweep's hparams_fit do not use it as a law."""

from __future__ import annotations

import json

from scaling import fit_chinchilla, make_plan
from scaling.synthetic.runs import batch_lr_sweep, chinchilla_table
from tests.helpers import scalelab


def test_plan_and_cli_with_an_optima_only_record(tmp_path):
    table = tmp_path / "bslr.csv"
    batch_lr_sweep(budgets=(1e15, 1e16), noise=0.0).to_csv(table, index=False)
    out = tmp_path / "bslr.json"
    r = scalelab("fit", "batch-lr", table, "--out", out, "--plot", tmp_path / "bslr.png")
    assert r.returncode == 0, r.stderr
    assert "exponents: not fitted" in r.stdout and "plot failed" not in r.stderr and (tmp_path / "bslr.png").exists()
    ch = fit_chinchilla(chinchilla_table(noise=0.0), top_k=4)
    plan = make_plan([ch, json.loads(out.read_text())], 1e20, vocab_size=4096)
    assert "lr" not in (plan.get("run") or {}) and "lr" not in plan
    assert any("batch-lr fit has no law (not fitted: 2 compute budgets" in w for w in plan["warnings"])
