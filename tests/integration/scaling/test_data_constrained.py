"""`--law data-constrained --terms data` (Muennighoff et al. 2023's data term, N' = N): the law,
recovery of known parameters, the bias of the plain law on repeated data, records, and bad input.
The complete law (the default, R_N_star fitted too): tests/test_data_constrained_full.py."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from scaling.synthetic.runs import data_constrained_table
from tests.helpers import scalelab


def test_cli_data_constrained(tmp_path):
    table = tmp_path / "dc.csv"
    data_constrained_table(noise=0.001).rename(columns={"U": "unique_tokens"}).to_csv(table, index=False)
    out = tmp_path / "dc.json"
    r = scalelab(
        "fit",
        "chinchilla",
        table,
        "--law",
        "data-constrained",
        "--terms",
        "data",
        "--top-k",
        "8",
        "--out",
        out,
        "--plot",
        tmp_path / "dc.png",
    )
    assert r.returncode == 0, r.stderr
    rec = json.loads(out.read_text())
    assert (
        rec["law"] == "chinchilla"
        and rec["settings"]["law"] == "data-constrained"
        and rec["columns"]["U"] == "unique_tokens"
    )
    assert rec["params"]["R_D_star"] == pytest.approx(15.4, rel=0.05) and "R_D_star" in r.stdout
    assert (tmp_path / "dc.png").stat().st_size > 10_000
    r = scalelab("plan", "--fit", out, "--compute", "1e20", "--json")
    assert r.returncode == 0, r.stderr
    plain = tmp_path / "plain.csv"
    pd.read_csv(table).drop(columns=["unique_tokens"]).to_csv(plain, index=False)
    r = scalelab("fit", "chinchilla", plain, "--law", "data-constrained")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "missing column for 'U'" in r.stderr and "unique_tokens" in r.stderr
