"""`scalelab fit moe`: synthetic runs drawn from the Krajewski and Clark laws (their published
constants as the truth) are recovered; what the design cannot identify is said; CLI exit codes and
record keys."""

from __future__ import annotations

import json

from scaling.laws.moe import KRAJEWSKI_PARAMS
from scaling.synthetic.moe import krajewski_table
from tests.helpers import run_cli


def test_cli_fit_moe_exit_codes_and_record(tmp_path):
    krajewski_table(noise=0.002, seed=1, sizes=(1e8, 4e8, 1.6e9), granularities=(1, 4, 16)).rename(
        columns={"G": "gran"}
    ).to_csv(tmp_path / "k.csv", index=False)
    res = run_cli(
        ["fit", "moe", "k.csv", "--col", "G=gran", "--holdout", "largest", "--json", "--out", "k.json"], tmp_path
    )
    assert res.returncode == 0, res.stderr
    rec = json.loads(res.stdout)
    for key in (
        "law",
        "params",
        "intervals",
        "objective",
        "n_points",
        "warnings",
        "data_sha256",
        "conventions",
        "design",
        "derived",
        "holdout",
        "settings",
    ):
        assert key in rec, key
    assert set(rec["params"]) == set(KRAJEWSKI_PARAMS) and rec["columns"]["G"] == "gran"
    assert json.loads((tmp_path / "k.json").read_text())["data_sha256"] == rec["data_sha256"]
    text = run_cli(["fit", "moe", "k.csv", "--col", "G=gran"], tmp_path)
    assert text.returncode == 0 and text.stdout.startswith("law: moe (krajewski)") and "dense needs" in text.stdout
    missing = run_cli(["fit", "moe", "k.csv"], tmp_path)
    assert missing.returncode == 2 and "missing column for 'G'" in missing.stderr
    assert run_cli(["fit", "moe", "k.csv", "--col", "X=gran"], tmp_path).returncode == 2
    assert run_cli(["fit", "moe", "nope.csv"], tmp_path).returncode == 2
    assert run_cli(["fit", "moe", "k.csv", "--law", "abnar"], tmp_path).returncode == 2
