"""Muennighoff et al. 2023's complete data-constrained law (`--law data-constrained`, default
`--terms data+params`): R_D_star and R_N_star fitted, recovery of the paper's constants, the
frontier and plan with few unique tokens (the paper's Figure 3 and its authors' worked example)."""

from __future__ import annotations

import json

from tests.helpers import scalelab
from tests.unit.scaling.test_data_constrained_full import DESIGN, table  # noqa: F401 (shared with the unit tests)


def test_cli_terms_and_plan_unique_tokens(tmp_path):
    path = tmp_path / "dc.csv"
    table(noise=0.001).to_csv(path, index=False)
    out = tmp_path / "dc.json"
    r = scalelab("fit", "chinchilla", path, "--law", "data-constrained", "--top-k", "8", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "R_N_star" in r.stdout and json.loads(out.read_text())["settings"]["terms"] == "data+params"
    r = scalelab("plan", out, "--compute", "1e21", "--unique-tokens", "2e9")
    assert r.returncode == 0, r.stderr
    assert "unique tokens: 2e+09 (--unique-tokens)" in r.stdout
    assert "with unlimited unique data N_opt would be" in r.stdout
    r = scalelab("fit", "chinchilla", path, "--terms", "data")
    assert r.returncode == 2 and "--terms applies to --law data-constrained only" in r.stderr
