"""A law is one object registered once: a toy law family written in this one file, by the recipe of
docs/ARCHITECTURE.md ("A law", step 3 with its typed options: a FitOptions dataclass, `options_from`,
`check`, `fit`, `summary`, `plot`, `predict`), becomes `scalelab fit toy`, listed by `scalelab fit --help`, its
flags generated from its own, its record saved and printed like every other law's, `scalelab predict`
(and `scaling.predict`) of its record, and its part of `scalelab plan` (and `make_plan`: its planner, registered
in the same file), with no other module touched. The built-in families' flags name their
typed options, and every law `scalelab predict` takes is one whose family predicts."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scaling.core.errors import InputError
from scaling.fits import flags as F
from scaling.fits.chinchilla.options import ChinchillaOptions
from scaling.fits.family import CLI_FIELDS, TABLE_FIELDS, Flag, LawFamily, options_from, register, unregister
from scaling.fits.options import FitOptions
from scaling.fits.record import FitRecord, data_sha256, make_record
from scaling.planning.planner import PlanDraft, Planner, register_planner, unregister_planner
from tests.helpers import scalelab

FIXTURES = Path(__file__).parents[2] / "fixtures" / "ddc73a7"


@dataclass(frozen=True)
class ToyOptions(FitOptions):
    """The toy's typed options (the recipe's step 2: a frozen dataclass extending FitOptions)."""

    form: str = "loglog"

    def check(self) -> ToyOptions:
        super().check()
        if self.form != "loglog":
            raise InputError(f"--form {self.form} is not written yet (allowed: loglog)")
        return self


def check_toy(args) -> str | None:
    """Bad options refused before DATA is read (the family's `check`)."""
    try:
        options_from(ToyOptions, args).check()
    except InputError as exc:
        return str(exc)
    return None


def fit_toy(args, data) -> FitRecord:
    """y = a x^b by least squares in log space, on the typed options."""
    opts = options_from(ToyOptions, args)
    df = pd.read_csv(data)
    b, log_a = np.polyfit(np.log(df["x"].to_numpy(float)), np.log(df["y"].to_numpy(float)), 1)
    return make_record(
        law="toy",
        approach=None,
        params={"a": float(np.exp(log_a)), "b": float(b)},
        intervals={},
        objective=None,
        n_points=len(df),
        warnings=[],
        data_sha256=data_sha256(df, ["x", "y"]),
        settings=dataclasses.asdict(opts),
        data_range={"x": [float(df["x"].min()), float(df["x"].max())]},
    )


def plot_toy(rec, data, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = pd.read_csv(data)
    fig, ax = plt.subplots()
    ax.loglog(df["x"], df["y"], "o", df["x"], rec.params["a"] * df["x"] ** rec.params["b"], "-")
    fig.savefig(path)
    plt.close(fig)


def predict_toy(rec, data, columns, ci: float, seed: int):
    """y at the table's x, against its measured y where it has one (scaling.fits.prediction's columns)."""
    from scaling.fits.prediction import add_columns, extrapolation, finish, input_columns

    df = pd.read_csv(data)
    x = df["x"].to_numpy(float)
    pred = rec.params["a"] * x ** rec.params["b"]
    out = input_columns(df, ("x",))
    add_columns(out, "y", True, pred, pred, pred, df["y"].to_numpy(float) if "y" in df else None)
    out["extrapolation_factor"] = extrapolation({"x": x}, rec.get("data_range") or {})
    return finish(out, ["y"], {"source": str(data)}, "the fitted line (the toy has no interval)", [], ci)


TOY = LawFamily(
    name="toy",
    help="a toy power law y = a x^b",
    flags=(
        F.data_flag("CSV with columns x, y"),
        F.out_flag(),
        Flag("--plot", metavar="F.png", help="draw the points and the fitted line here"),
        Flag("--form", choices=["loglog", "linear"], default="loglog", help="how the law is fitted (default loglog)"),
        Flag("--ci", type=float, default=0.95, help="interval level (default 0.95)"),
        F.json_flag(),
    ),
    options=ToyOptions,
    check=check_toy,
    fit=fit_toy,
    summary=lambda rec: f"toy: y = {rec.params['a']:.4g} x^{rec.params['b']:.4g}",
    plot=plot_toy,
    predict=predict_toy,
)


def plan_toy(draft: PlanDraft, records: list) -> None:
    """The toy's part of a plan: y at the plan's compute, read as x (after the Chinchilla law has allocated)."""
    p = records[-1]["params"]
    draft.out["toy"] = {"x": draft.compute, "y": p["a"] * draft.compute ** p["b"], "N_opt": draft.out["N_opt"]}


TOY_PLANNER = Planner(law="toy", apply=plan_toy)


@pytest.fixture
def toy():
    register(TOY)
    register_planner(TOY_PLANNER)
    yield TOY
    unregister_planner(TOY.name)
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
    r = scalelab("fit", "toy", tmp_path / "t.csv", "--out", out, "--json", "--plot", tmp_path / "line.png")
    assert r.returncode == 0, r.stderr
    rec = FitRecord.load(out)
    assert rec.law_name == "toy" and rec.params["a"] == pytest.approx(3.0) and rec.params["b"] == pytest.approx(0.5)
    assert rec.settings == {"bootstrap": 0, "seed": 0, "ci": 0.95, "holdout": None, "form": "loglog"}  # typed options
    assert json.loads(r.stdout) == rec.to_dict() and (tmp_path / "line.png").read_bytes()[:4] == b"\x89PNG"
    r = scalelab("fit", "toy", tmp_path / "t.csv")  # the family's summary
    assert r.returncode == 0 and r.stdout.strip() == "toy: y = 3 x^0.5"

    r = scalelab("fit", "toy", tmp_path / "t.csv", "--form", "linear")  # the options' check: exit 2, named
    assert r.returncode == 2 and "--form linear is not written yet (allowed: loglog)" in r.stderr
    r = scalelab("fit", "toy", tmp_path / "t.csv", "--ci", "1.5")  # FitOptions' shared check
    assert r.returncode == 2 and "--ci must be between 0 and 1 (got 1.5)" in r.stderr
    r = scalelab("fit", "toy", tmp_path / "t.csv", "--form", "cubic")  # argparse's choices
    assert r.returncode == 2 and "invalid choice: 'cubic'" in r.stderr


def test_the_toy_law_predicts_through_its_family(toy, tmp_path):
    x = np.geomspace(1, 1e4, 20)
    pd.DataFrame({"x": x, "y": 3.0 * x**0.5}).to_csv(tmp_path / "t.csv", index=False)
    assert scalelab("fit", "toy", tmp_path / "t.csv", "--out", tmp_path / "toy.json").returncode == 0
    pd.DataFrame({"x": [100.0, 1e6], "y": [31.0, np.nan]}).to_csv(tmp_path / "new.csv", index=False)

    r = scalelab("predict", tmp_path / "toy.json", tmp_path / "new.csv", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["law"] == "toy" and doc["quantities"] == ["y"]
    first, far = doc["rows"]
    assert first["predicted"] == pytest.approx(30.0) and first["rel_error"] == pytest.approx(30.0 / 31.0 - 1)
    assert first["extrapolation_factor"] == 1.0 and far["extrapolation_factor"] == pytest.approx(100.0)
    assert far["predicted"] == pytest.approx(3000.0) and far["measured"] is None

    from scaling import predict  # the public API goes through the same family

    pred = predict(FitRecord.load(tmp_path / "toy.json"), tmp_path / "new.csv")
    assert pred.df["predicted"].tolist() == pytest.approx([30.0, 3000.0])


def test_the_toy_law_is_planned_through_its_planner(toy, tmp_path):
    from scaling.planning.plan import make_plan

    x = np.geomspace(1e17, 1e21, 20)
    pd.DataFrame({"x": x, "y": 3.0 * x**0.5}).to_csv(tmp_path / "t.csv", index=False)
    assert scalelab("fit", "toy", tmp_path / "t.csv", "--out", tmp_path / "toy.json").returncode == 0
    chinchilla = FIXTURES / "fit_chinchilla.json"  # the allocating law's record (written at ddc73a7)

    r = scalelab("plan", chinchilla, tmp_path / "toy.json", "--compute", "1e20", "--vocab-size", "512", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["toy"]["x"] == 1e20 and doc["toy"]["y"] == pytest.approx(3e10)
    assert doc["toy"]["N_opt"] == doc["N_opt"]  # after the allocation
    assert [f["law"] for f in doc["fits"]] == ["chinchilla", "toy"]
    plan = make_plan([FitRecord.load(chinchilla), FitRecord.load(tmp_path / "toy.json")], 1e19, vocab_size=512)
    assert plan["toy"]["y"] == pytest.approx(3.0 * 1e19**0.5)

    r = scalelab("plan", tmp_path / "toy.json", "--compute", "1e20")  # the toy does not allocate
    assert r.returncode == 2 and "plan needs a chinchilla fit record" in r.stderr
    with pytest.raises(ValueError, match="a planner for the 'toy' law is registered already"):
        register_planner(Planner(law="toy", apply=plan_toy))


def toy_plan_alone(fits: list, args):
    from scaling.planning.record import PlanRecord

    return PlanRecord({"compute": args.compute, "records": len(fits)})


def test_a_law_that_plans_alone_or_through_an_option_of_its_own_is_its_planner_s_word(toy, tmp_path):
    """`scalelab plan` names no law: a planner's `alone` takes every record (MoE's way), its `given_with` refuses
    the records among --fit (the accuracy chain's way), and a planner with neither nor an `apply` is refused."""
    x = np.geomspace(1e17, 1e21, 20)
    pd.DataFrame({"x": x, "y": 3.0 * x**0.5}).to_csv(tmp_path / "t.csv", index=False)
    assert scalelab("fit", "toy", tmp_path / "t.csv", "--out", tmp_path / "toy.json").returncode == 0
    unregister_planner("toy")
    try:
        register_planner(
            Planner(law="toy", alone=toy_plan_alone, format=lambda plan: f"toy plan at {plan['compute']:g}")
        )
        r = scalelab("plan", tmp_path / "toy.json", "--compute", "1e20")
        assert r.returncode == 0 and r.stdout.strip() == "toy plan at 1e+20", r.stderr
        r = scalelab("plan", tmp_path / "toy.json", "--compute", "1e20", "--json")
        assert r.returncode == 0 and json.loads(r.stdout)["records"] == 1

        unregister_planner("toy")
        register_planner(Planner(law="toy", given_with="--toy-fit"))
        r = scalelab("plan", FIXTURES / "fit_chinchilla.json", tmp_path / "toy.json", "--compute", "1e20")
        assert r.returncode == 2 and "a toy fit is not an allocation law: give it with --toy-fit instead" in r.stderr
        with pytest.raises(ValueError, match="give `apply`, or"):
            register_planner(Planner(law="toy-nothing"))
    finally:
        unregister_planner("toy")
        register_planner(TOY_PLANNER)


def test_a_law_whose_family_does_not_predict_is_refused_by_name(tmp_path):
    rec = make_record(
        law="critical-batch",
        approach=None,
        params={},
        intervals={},
        objective=None,
        n_points=0,
        warnings=[],
        data_sha256="0" * 64,
    )
    rec.save(tmp_path / "cb.json")
    (tmp_path / "t.csv").write_text("N,D,loss\n1,1,1\n")
    r = scalelab("predict", tmp_path / "cb.json", tmp_path / "t.csv")
    assert r.returncode == 2 and "predict does not handle 'critical-batch' fits (it handles " in r.stderr
    assert "chinchilla, kaplan, batch-lr, lr-annealing, accuracy, moe, task-loss fits)" in r.stderr


def test_the_toy_law_is_gone_when_unregistered():
    assert "toy" not in scalelab("fit", "--help").stdout


def test_a_second_family_of_a_taken_name_is_refused(toy):
    with pytest.raises(ValueError, match="'toy' is registered already"):
        register(dataclasses.replace(TOY, help="another"))


def test_a_family_whose_flags_its_options_or_plot_do_not_take_is_refused():
    with pytest.raises(ValueError, match="'toy': --plot but no plot"):
        register(dataclasses.replace(TOY, plot=None))
    with pytest.raises(ValueError, match=r"'toy': --size sets 'size', which ToyOptions has no field for"):
        register(dataclasses.replace(TOY, flags=(*TOY.flags, Flag("--size", type=int))))
    assert "toy" not in scalelab("fit", "--help").stdout


def test_every_built_in_family_s_flags_are_its_typed_options():
    from scaling.fits.families import BUILTIN, families

    assert [f.name for f in families()] == list(BUILTIN)
    for family in families():
        options = {f.name for f in dataclasses.fields(family.options)}
        flagged = (
            {f.field for f in family.flags} - CLI_FIELDS - (TABLE_FIELDS if family.load is F.load_table else set())
        )
        assert flagged <= options, family.name  # every flag sets a typed option
        library_only = {"columns", "n_kind", "curves", "n_bins", "delta", "bootstrap_top_k"}
        assert options - flagged <= library_only, family.name
    chinchilla = next(f for f in families() if f.name == "chinchilla")
    assert chinchilla.options is ChinchillaOptions
    assert {f.field for f in chinchilla.flags if f.name == "--compute"} == {"at_compute"}
