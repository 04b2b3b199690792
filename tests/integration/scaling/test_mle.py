"""Maximum likelihood (`--objective mle`): Epoch's headline fit, the density, sigma, bootstrap, CLI."""

from __future__ import annotations

import json

from tests.helpers import epoch_csv, scalelab


def test_cli_objective_mle(tmp_path):
    out = tmp_path / "mle.json"
    r = scalelab(
        "fit", "chinchilla", epoch_csv(), "--drop-highest", "5", "--objective", "mle", "--top-k", "8", "--out", out
    )
    assert r.returncode == 0, r.stderr
    rec = json.loads(out.read_text())
    assert rec["law"] == "chinchilla" and rec["settings"]["objective"] == "mle"
    assert set(rec["params"]) >= {"E", "A", "B", "alpha", "beta", "sigma"}
    assert "negative log-likelihood" in r.stdout and "sigma" in r.stdout
    r = scalelab("plan", "--fit", out, "--compute", "1e22", "--json")
    assert r.returncode == 0, r.stderr
    r = scalelab("fit", "chinchilla", epoch_csv(), "--objective", "mle", "--approach", "2")
    assert r.returncode == 2 and "--objective mle applies to approach 3 only" in r.stderr
