"""A law is one object registered once: a toy law family written in this one file becomes
`scalelab fit toy`, listed by `scalelab fit --help`, its flags generated from its own, and its record
saved and printed like every other law's. The built-in families' flags name their typed options."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from scaling.fits import flags as F
from scaling.fits.chinchilla.options import ChinchillaOptions
from scaling.fits.family import CLI_FIELDS, Flag, LawFamily, register, unregister
from scaling.fits.record import FitRecord, make_record
from tests.helpers import scalelab


def fit_toy(args, data) -> FitRecord:
    """y = a x^b by least squares in log space (form loglog) or in y (form linear, on log x)."""
    df = pd.read_csv(data)
    x, y = np.log(df["x"].to_numpy(float)), df["y"].to_numpy(float)
    b, log_a = np.polyfit(x, np.log(y), 1) if args.form == "loglog" else (np.nan, np.nan)
    return make_record(
        law="toy",
        approach=None,
        params={"a": float(np.exp(log_a)), "b": float(b)},
        intervals={},
        objective=None,
        n_points=len(df),
        warnings=[],
        data_sha256=None,
        settings={"form": args.form},
    )


TOY = LawFamily(
    name="toy",
    help="a toy power law y = a x^b",
    flags=(
        F.data_flag("CSV with columns x, y"),
        F.out_flag(),
        Flag("--form", choices=["loglog", "linear"], default="loglog", help="how the law is fitted (default loglog)"),
        F.json_flag(),
    ),
    check=lambda args: None if args.form == "loglog" else "--form linear is not written yet",
    fit=fit_toy,
)


@pytest.fixture
def toy():
    register(TOY)
    yield TOY
    unregister(TOY.name)


def test_a_toy_law_in_one_file_is_a_fit_subcommand(toy, tmp_path):
    r = scalelab("fit", "--help")
    assert r.returncode == 0 and "a toy power law y = a x^b" in r.stdout
    assert r.stdout.index("task-loss") < r.stdout.index("toy")  # after the built-in laws
    r = scalelab("fit", "toy", "--help")
    assert "--form {loglog,linear}" in r.stdout and "how the law is fitted (default loglog)" in r.stdout

    x = np.geomspace(1, 1e4, 20)
    pd.DataFrame({"x": x, "y": 3.0 * x**0.5}).to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "toy.json"
    r = scalelab("fit", "toy", tmp_path / "t.csv", "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    rec = FitRecord.load(out)
    assert rec.law_name == "toy" and rec.params["a"] == pytest.approx(3.0) and rec.params["b"] == pytest.approx(0.5)
    assert json.loads(r.stdout) == rec.to_dict()

    r = scalelab("fit", "toy", tmp_path / "t.csv", "--form", "linear")  # the family's check: exit 2, named
    assert r.returncode == 2 and "--form linear is not written yet" in r.stderr
    r = scalelab("fit", "toy", tmp_path / "t.csv", "--form", "cubic")  # argparse's choices
    assert r.returncode == 2 and "invalid choice: 'cubic'" in r.stderr


def test_the_toy_law_is_gone_when_unregistered():
    assert "toy" not in scalelab("fit", "--help").stdout


def test_a_second_family_of_a_taken_name_is_refused(toy):
    with pytest.raises(ValueError, match="'toy' is registered already"):
        register(dataclasses.replace(TOY, help="another"))


def test_every_built_in_family_s_flags_are_its_typed_options():
    from scaling.cli.fit import BUILTIN, families

    assert [f.name for f in families()] == list(BUILTIN)
    for family in families():
        options = {f.name for f in dataclasses.fields(family.options)}
        flagged = (
            {f.field for f in family.flags} - CLI_FIELDS - (F.TABLE_FIELDS if family.load is F.load_table else set())
        )
        assert flagged <= options, family.name  # every flag sets a typed option
        library_only = {"columns", "n_kind", "curves", "n_bins", "delta", "bootstrap_top_k"}
        assert options - flagged <= library_only, family.name
    chinchilla = next(f for f in families() if f.name == "chinchilla")
    assert chinchilla.options is ChinchillaOptions
    assert {f.field for f in chinchilla.flags if f.name == "--compute"} == {"at_compute"}
