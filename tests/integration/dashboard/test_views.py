"""The dashboard's MoE scaling, Plan, chain and lr-annealing endpoints (HTTP level): the numbers they
send are the laws' and `scalelab plan`'s own, from fit records made by the real CLI (in-process) on
synthetic data with a known truth; bad inputs are 400s naming the input."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from tests.helpers import write_run

pytest.importorskip("httpx", reason="fastapi.testclient needs httpx")


from fastapi.testclient import TestClient

from dashboard.demo import data as demo_data
from dashboard.server import create_app
from launch.cli import main as scalelab
from scaling.fits.accuracy import SigmoidAccuracy
from scaling.laws.loss import ChinchillaLaw
from scaling.laws.moe import ClarkLaw, KrajewskiLaw
from scaling.planning.run_model import run_label

MODEL = {"d_model": 48, "n_layers": 2, "n_heads": 4, "vocab_size": 512, "seq_len": 64}


def cli(*args) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = scalelab([str(a) for a in args])
    assert code == 0, err.getvalue()[-2000:]
    return code, out.getvalue()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """runs/: two dense and two MoE runs (one expert d_ff: G = 2); fits/: records from `scalelab fit`."""
    base = tmp_path_factory.mktemp("views")
    runs, fits = base / "runs", base / "fits"
    data = fits / "data"
    data.mkdir(parents=True)
    for name, moe, n, d, loss in (
        ("dense-a", None, 5e4, 1e6, 5.0),
        ("dense-b", None, 1e5, 2e6, 4.6),
        ("moe-a", {"num_experts": 8, "top_k": 2, "d_ff": 64, "router": "softmax_topk"}, 6e4, 1e6, 4.8),
        ("moe-b", {"num_experts": 8, "top_k": 2, "d_ff": 64, "router": "aux_free_bias"}, 6e4, 2e6, 4.5),
    ):
        write_run(
            runs / "s" / name,
            config={"model": {**MODEL, **({"moe": moe} if moe else {})}},
            summary={
                "status": "done",
                "steps": 10,
                "tokens": d,
                "active_non_embedding_params": n,
                "flops": 9 * n * d,
                "final_val_loss": loss,
                "final_loss": loss + 0.1,
            },
        )
    fit = lambda *a: cli("fit", *a)  # noqa: E731
    fit("moe", demo_data.moe_table(data / "moe.csv"), "--bootstrap", "6", "--out", fits / "moe-k.json")
    fit("moe", demo_data.clark_table(data / "clark.csv"), "--law", "clark", "--out", fits / "moe-clark.json")
    import pandas as pd

    pd.read_csv(data / "moe.csv").query("G == 2 or E == 1").assign(G=2.0).to_csv(data / "one-g.csv", index=False)
    fit("moe", data / "one-g.csv", "--out", fits / "moe-one-g.json")  # one granularity: g, gamma not identified
    tree = demo_data.chain_runs(data / "chain-runs")
    fit("task-loss", tree, "--bootstrap", "6", "--out", fits / "task-loss.json")
    fit("accuracy", tree, "--bootstrap", "10", "--out", fits / "accuracy.json")
    fit("accuracy", tree, "--loss-metric", "val_loss", "--out", fits / "acc-val.json")  # chains from a chinchilla fit
    fit("chinchilla", tree, "--bootstrap", "6", "--out", fits / "ch-val.json")
    fit(
        "lr-annealing",
        demo_data.annealing_table(data / "curves.csv"),
        "--holdout",
        "last-run",
        "--bootstrap",
        "8",
        "--out",
        fits / "annealing.json",
    )
    syn = __import__("scaling.synthetic.runs", fromlist=["chinchilla_table"])
    syn.chinchilla_table(budgets=(1e15, 1e16, 1e17), n_per_budget=7).to_csv(data / "iso.csv", index=False)
    fit(
        "chinchilla", data / "iso.csv", "--approach", "3", "--bootstrap", "8", "--top-k", "8", "--out", fits / "ch.json"
    )
    return {"client": TestClient(create_app(runs, fits, refresh_s=0)), "fits": fits, "runs": runs, "data": data}


def _fig(figs, fid):
    return next(f for f in figs if f["id"] == fid)


def _trace(fig, name):
    return next(t for t in fig["data"] if t.get("name") == name)


def test_moe_runs_loss_vs_compute_dense_and_moe(served):
    from models.config import ModelConfig

    c = served["client"]
    d = c.get("/api/moe/scaling?fit=&color=granularity").json()
    assert d["fit"] is None and d["n_runs"] == 4
    fig = d["runs_figure"]
    G = ModelConfig(**MODEL).ffn_dim / 64  # dense d_ff / expert d_ff, as `fit moe` counts it
    dense, moe = _trace(fig, "dense"), _trace(fig, f"G={G:g}")
    assert sorted(dense["x"]) == pytest.approx([6 * 5e4 * 1e6, 6 * 1e5 * 2e6]) and sorted(dense["y"]) == [4.6, 5.0]
    assert sorted(moe["x"]) == pytest.approx([6 * 6e4 * 1e6, 6 * 6e4 * 2e6])
    by_router = c.get("/api/moe/scaling?fit=&color=router&x=flops").json()["runs_figure"]
    assert {t["name"] for t in by_router["data"]} == {"dense", "softmax_topk", "aux_free_bias"}
    assert _trace(by_router, "aux_free_bias")["x"] == [pytest.approx(9 * 6e4 * 2e6)]  # the trainer's own count
    csv = c.get("/api/moe/scaling.csv").text.splitlines()
    assert csv[0] == "id,E,G,top_k,router,N,D,C_6nd,flops,loss" and len(csv) == 5
    for bad, name in (("color=size", "color"), ("x=tokens", "x"), ("fit=ch.json", "fit moe")):
        r = c.get("/api/moe/scaling?" + bad)
        assert r.status_code == 400 and name in r.json()["error"]


def test_moe_krajewski_law_curves_band_and_parity(served):
    rec = json.loads((served["fits"] / "moe-k.json").read_text())
    law = KrajewskiLaw(**rec["params"])
    d = served["client"].get("/api/moe/scaling?fit=moe-k.json").json()["fit"]
    assert d["not_identified"] == [] and d["n_data_points"] == 48
    figs = {f["id"]: f for f in d["figures"]}
    main = figs["moe_law"]
    for G in (1, 2, 4, 8):
        line = _trace(main, f"law L_opt(C), G={G}")
        xs = np.array(line["x"])
        assert line["y"] == pytest.approx(law.optimal_loss(xs, float(G)).tolist(), rel=1e-9)
        assert xs.max() == pytest.approx(rec["data_range"]["C"][1])  # solid over the data...
    assert any(t["name"] == "extrapolation" for t in main["data"])  # ...dashed to the record's derived budgets
    assert any("interval (bootstrap)" in t["name"] for t in main["data"])
    pts = [p for t in main["data"] if t["name"] in ("dense", "E=16", "E=32", "E=64") for p in zip(t["x"], t["y"])]
    assert len(pts) == 48
    parity = figs["moe_parity"]
    dense = _trace(parity, "dense")
    import pandas as pd

    df = pd.read_csv(served["data"] / "moe.csv").query("E == 1").sort_values("loss")
    got = sorted(zip(dense["x"], dense["y"]))
    assert [g[0] for g in got] == pytest.approx(df["loss"].tolist())
    assert [g[1] for g in got] == pytest.approx(law.predict(df["N"], df["D"], df["G"]).tolist(), rel=1e-9)


def test_moe_clark_law_and_a_not_identified_moe_fit(served):
    c = served["client"]
    rec = json.loads((served["fits"] / "moe-clark.json").read_text())
    main = _fig(c.get("/api/fit?id=moe-clark.json").json()["figures"], "moe_law")
    line = _trace(main, "law E=16")
    assert line["y"] == pytest.approx(ClarkLaw(**rec["params"]).predict(np.array(line["x"]), 16).tolist(), rel=1e-9)
    d = c.get("/api/fit?id=moe-one-g.json").json()
    assert any("g and gamma cannot be estimated" in f for f in d["not_identified"])
    names = [t["name"] for f in d["figures"] for t in f["data"]]
    assert names and not any(n.startswith("law") or "interval" in n or n == "extrapolation" for n in names)  # data only
    assert all(f["title"].endswith("(not identified)") for f in d["figures"])


def test_plan_rows_are_what_scalelab_plan_prints(served):
    c, fits = served["client"], served["fits"]
    q = "fit=ch.json&device=h100-sxm&num-devices=8&usd-per-device-hour=2&mfu=0.45&points=3"
    d = c.get("/api/plan?" + q).json()
    rec = json.loads((fits / "ch.json").read_text())
    cmax = rec["data_range"]["C"][1]
    assert [r["compute"] for r in d["rows"]] == pytest.approx([cmax, cmax * 1000**0.5, cmax * 1000])
    assert d["x"] == "usd" and d["assumptions"]["mfu"] == 0.45 and d["assumptions"]["num_devices"] == 8
    for row in d["rows"]:
        _, out = cli(
            "plan",
            fits / "ch.json",
            "--compute",
            repr(row["compute"]),
            "--device",
            "h100-sxm",
            "--num-devices",
            "8",
            "--usd-per-device-hour",
            "2",
            "--mfu",
            "0.45",
            "--json",
        )
        plan = json.loads(out)
        assert (
            row["preset"] == plan["run"]["preset"]
            and row["model"] == run_label(plan["run"])
            and row["loss"] == pytest.approx(plan["run"]["loss"])
        )
        assert [row["loss_lo"], row["loss_hi"]] == pytest.approx(plan["run"]["loss_interval"])
        # the budget's verdict (scaling.planning.verdict) marks the row: the CLI's, with its reasons
        assert row["verdict"] == plan["verdict"]["status"] and row["verdict_reasons"] == plan["verdict"]["reasons"]
        assert row["identified"] == (plan["verdict"]["status"] != "not identified at this budget")
        for k in ("usd", "device_hours", "days", "tokens_per_s"):
            assert row[k] == pytest.approx(plan["cost"][k]), k
    losses = [r["loss"] for r in sorted(d["rows"], key=lambda r: r["usd"])]
    assert [r["pareto"] for r in sorted(d["rows"], key=lambda r: r["usd"])] == [
        all(x < y for y in losses[:i]) for i, x in enumerate(losses)
    ]
    fig = _fig(d["figures"], "plan_cost_loss")
    assert _trace(fig, "planned run, 95% prediction interval")["x"] == [r["usd"] for r in d["rows"]]
    front = _trace(fig, "Pareto front")
    assert front["y"] == [r["loss"] for r in sorted(d["rows"], key=lambda r: r["usd"]) if r["pareto"]]
    csv = c.get("/api/plan.csv?" + q).text.splitlines()
    assert csv[0].startswith("compute,verdict,model,preset,shape_rule,N,tokens,loss,loss_lo,loss_hi") and len(csv) == 4


def test_plan_defaults_and_bad_inputs(served):
    c = served["client"]
    assert c.get("/api/plan").json()["fit"] == "ch-val.json"  # the first approach-3 chinchilla record
    d = c.get("/api/plan?fit=ch.json").json()
    assert d["fit"] == "ch.json" and d["x"] == "compute" and d["assumptions"] is None and len(d["rows"]) == 13
    assert "usd" not in d["rows"][0] and [f["id"] for f in d["figures"]] == ["plan_cost_loss"]
    d = c.get(
        "/api/plan?fit=ch.json&device=a100-80gb&points=2"
    ).json()  # mfu auto, no run on that device here: each budget's run at the step-time model's MFU, as the CLI
    assert d["x"] == "device_hours" and d["assumptions"]["mfu"] == d["rows"][0]["mfu"] != 0.4
    assert "by the step-time model for the searched layout" in d["assumptions"]["mfu_source"]
    lo, hi = d["assumptions"]["mfu_interval"]  # the model's +-20% calibration error, at the 95% level
    assert 0.8 * d["rows"][0]["mfu"] <= lo < d["rows"][0]["mfu"] < hi <= 1.2 * d["rows"][0]["mfu"]
    for row in d["rows"]:
        _, out = cli("plan", served["fits"] / "ch.json", "--compute", repr(row["compute"]), "--device", "a100-80gb",
                     "--runs", served["runs"], "--json")  # fmt: skip
        cost = json.loads(out)["cost"]
        assert row["mfu"] == pytest.approx(cost["mfu"]) and row["device_hours"] == pytest.approx(cost["device_hours"])
    assert d["rows"][0]["device_hours_lo"] < d["rows"][0]["device_hours"] < d["rows"][0]["device_hours_hi"]
    assert (
        "none of the 4 finished runs under . ran on a100-80gb" in d["assumptions"]["mfu_source"]
    )  # it read the served runs...
    assert (
        str(served["runs"].parent) not in c.get("/api/plan?device=a100-80gb&points=2").text
    )  # ...without naming the server path
    for bad, said in (
        ("device=h100-sxm&mfu=2", "--mfu"),
        ("device=tpu", "--device 'tpu'"),
        ("num-devices=4", "--num-devices"),
        ("device=h100-sxm&x=usd", "usd-per-device-hour"),
        ("points=1", "points"),
        ("from=1e18&to=1e17", "to"),
        ("fit=moe-k.json", "chinchilla"),
        ("ci=1.5", "ci"),
    ):
        r = c.get("/api/plan?" + bad)
        assert r.status_code == 400 and said in r.json()["error"], (bad, r.text)


def test_chain_figures_follow_both_laws(served):
    c, fits = served["client"], served["fits"]
    acc = json.loads((fits / "accuracy.json").read_text())
    tl = json.loads((fits / "task-loss.json").read_text())
    d = c.get("/api/fit?id=accuracy.json&task=synthetic_2choice").json()
    assert (
        d["tasks"] == ["synthetic_2choice", "synthetic_4choice"]
        and d["partners"] == ["task-loss.json"]
        and d["partner"] == "task-loss.json"
    )
    assert d["record"]["params"] == acc["tasks"]["synthetic_2choice"]["params"] and d["not_identified"] == []
    figs = {f["id"]: f for f in d["figures"]}
    assert list(figs) == ["task_loss", "accuracy", "chain"]
    sig = _trace(figs["accuracy"], "sigmoid fit")
    assert sig["y"] == pytest.approx(
        SigmoidAccuracy(**acc["tasks"]["synthetic_2choice"]["params"]).predict(np.array(sig["x"])).tolist()
    )
    assert _trace(figs["accuracy"], "chance 0.5")["y"] == [0.5, 0.5]
    assert len(_trace(figs["accuracy"], "evaluated runs")["x"]) == 20
    assert any("interval (bootstrap of the sigmoid)" in t["name"] for t in figs["accuracy"]["data"])
    law = ChinchillaLaw(**{k: tl["tasks"]["synthetic_2choice"]["params"][k] for k in ("E", "A", "B", "alpha", "beta")})
    line = next(t for t in figs["task_loss"]["data"] if t["name"].startswith("law N≈"))
    n = float(line["name"].split("≈")[1])
    assert line["y"] == pytest.approx(
        law.predict(n, np.array(line["x"]) / (6 * n)).tolist(), rel=1e-6
    )  # C = 6 N D (6ND_total)
    # the chain: predicted accuracy with its interval beside the measured one at every evaluated run
    from scaling.planning.accuracy_chain import predict_chain

    pred = next(t for t in figs["chain"]["data"] if t["name"].startswith("chain prediction"))
    meas = next(t for t in figs["chain"]["data"] if t["name"] == "measured accuracy")
    assert len(pred["x"]) == len(meas["x"]) == 4 and pred["error_y"]["array"]
    n0 = float(figs["chain"]["data"][0]["name"].split("≈")[1])
    want = predict_chain(acc, n0, pred["x"][0] / (6 * n0), task_loss=tl, ci=0.95)["tasks"]["synthetic_2choice"]["acc"]
    assert pred["y"][0] == pytest.approx(want, rel=1e-6)
    d4 = c.get("/api/fit?id=task-loss.json&task=synthetic_4choice&with=accuracy.json").json()
    assert d4["record"]["params"] == tl["tasks"]["synthetic_4choice"]["params"] and d4["figures"][0][
        "title"
    ].startswith("synthetic_4choice")
    alone = c.get("/api/fit?id=accuracy.json&with=none").json()
    assert [f["id"] for f in alone["figures"]] == ["accuracy"] and alone["partner"] is None
    for bad, said in (("task=nope", "not in this fit"), ("with=ch.json", "does not chain")):
        r = c.get("/api/fit?id=accuracy.json&" + bad)
        assert r.status_code == 400 and said in r.json()["error"]
    rows = c.get("/api/fit.csv?id=accuracy.json").text.splitlines()
    assert rows[0] == "task,param,value,lo,hi" and len(rows) == 1 + 8


def test_an_accuracy_fit_on_the_validation_loss_chains_from_a_chinchilla_fit(served):
    from scaling.planning.accuracy_chain import predict_chain

    fits = served["fits"]
    d = served["client"].get("/api/fit?id=acc-val.json&with=ch-val.json&task=synthetic_4choice").json()
    assert d["partner"] == "ch-val.json" and d["partner_law"] == "chinchilla" and "ch-val.json" in d["partners"]
    figs = {f["id"]: f for f in d["figures"]}
    assert figs["task_loss"]["title"] == "synthetic_4choice · step 1: validation loss vs compute"
    pred = next(t for t in figs["chain"]["data"] if t["name"].startswith("chain prediction"))
    meas = next(t for t in figs["chain"]["data"] if t["name"] == "measured accuracy")
    assert len(pred["x"]) == len(meas["x"]) == 4  # the evaluated runs (N, D from their summaries)
    acc, ch = (json.loads((fits / f).read_text()) for f in ("acc-val.json", "ch-val.json"))
    n0 = float(figs["chain"]["data"][0]["name"].split("≈")[1])
    from scaling.fits.record import FitRecord

    want = predict_chain(acc, n0, pred["x"][0] / (6 * n0), chinchilla=FitRecord(ch))["tasks"]["synthetic_4choice"]
    assert pred["y"][0] == pytest.approx(want["acc"], rel=1e-6)
    assert pred["error_y"]["array"][0] == pytest.approx(want["interval"][1] - want["acc"], rel=1e-6)


def test_a_flat_task_is_flagged_alone(served, tmp_path):
    """One task's sigmoid not identified (flat): that task's law is not drawn, the other's is."""
    import pandas as pd

    rng = np.random.default_rng(0)
    L = np.linspace(1.5, 3.0, 20)
    df = pd.concat(
        [
            pd.DataFrame({"task": "moves", "loss": L, "acc": SigmoidAccuracy(0.45, 0.5, -6.0, 2.0).predict(L)}),
            pd.DataFrame({"task": "flat", "loss": L, "acc": 0.6 + rng.normal(0, 1e-4, L.size)}),
        ]
    )
    df.to_csv(served["data"] / "flat.csv", index=False)
    cli("fit", "accuracy", served["data"] / "flat.csv", "--out", served["fits"] / "flat.json")
    c = served["client"]
    flat = c.get("/api/fit?id=flat.json&task=flat").json()
    assert any("the fit is flat" in f for f in flat["not_identified"])
    fig = _fig(flat["figures"], "accuracy")
    assert fig["title"].endswith("(not identified)") and {t["name"] for t in fig["data"]} == {"evaluated runs"}
    moves = c.get("/api/fit?id=flat.json&task=moves").json()
    assert moves["not_identified"] == [] and any(
        t["name"] == "sigmoid fit" for t in _fig(moves["figures"], "accuracy")["data"]
    )
    assert next(f for f in c.get("/api/fits").json()["fits"] if f["id"] == "flat.json")["not_identified"] is True


def test_lr_annealing_curves_against_the_law(served):
    from scaling.laws.lr_annealing import predict_curve

    rec = json.loads((served["fits"] / "annealing.json").read_text())
    d = served["client"].get("/api/fit?id=annealing.json").json()
    assert d["not_identified"] == [] and d["n_data_points"] == 4
    figs = {f["id"]: f for f in d["figures"]}
    curves = figs["annealing_curves"]
    import pandas as pd

    tab = pd.read_csv(served["data"] / "curves.csv")
    for run in ("constant", "wsd-linear", "wsd-sqrt", "cosine"):
        name = run + (" (held out)" if run == "cosine" else "")
        pts = _trace(curves, name)
        assert len(pts["x"]) == tab.query("run == @run")["loss"].notna().sum()
        law = _trace(curves, f"law: {name}")
        pred = predict_curve(rec, tab.query("run == @run")["lr"].to_numpy())
        steps = np.array(law["x"], int)
        assert law["y"] == pytest.approx(pred.loss[steps - 1].tolist(), rel=1e-9)
        assert steps[0] >= 10 and steps[-1] == 1000  # from the first observation to the end
    assert any(t["name"].endswith("95% interval") for t in curves["data"])
    assert [t["name"] for t in figs["annealing_lr"]["data"]] == [
        "constant",
        "wsd-linear",
        "wsd-sqrt",
        "cosine (held out)",
    ]
    ho = _trace(figs["annealing_last"], "held out: law")
    assert ho["y"] == [pytest.approx(rec["holdout"]["final_points"][0]["predicted"])]


def test_a_chain_source_whose_evals_link_out_is_not_read(tmp_path):
    """A record's run tree is re-read only when none of the files its reader opens (evals/<step>.json
    included) links outside the served roots."""
    import os

    fits, outside = tmp_path / "fits", tmp_path / "outside"
    outside.mkdir()
    tree = demo_data.chain_runs(fits / "data" / "tree")
    cli("fit", "accuracy", tree, "--out", fits / "acc.json")
    ev = sorted(tree.glob("*/evals/100.json"))[0]
    (outside / "100.json").write_text(ev.read_text().replace("synthetic_2choice", "SECRET-OUTSIDE"))
    ev.unlink()
    os.symlink(outside / "100.json", ev)
    (tmp_path / "runs").mkdir()
    c = TestClient(create_app(tmp_path / "runs", fits, refresh_s=0))
    r = c.get("/api/fit?id=acc.json")
    d = r.json()
    assert d["n_data_points"] == 0 and "links outside the served directories" in d["points_note"]
    assert "SECRET" not in r.text and str(tmp_path) not in r.text
    assert [t["name"] for t in _fig(d["figures"], "accuracy")["data"]][-1] == "sigmoid fit"  # the law is still drawn
    assert [i["id"] for i in c.get("/api/fits").json()["fits"]] == [
        "acc.json"
    ]  # the run tree's JSON files are not records


def test_demo_help_prints_usage_and_builds_nothing(tmp_path):
    import subprocess
    import sys

    from tests.helpers import REPO

    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-m", "dashboard.demo.build", "--help"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        r.returncode == 0 and r.stdout.startswith("usage: python -m dashboard.demo.build") and "--no-fits" in r.stdout
    )
    assert list(tmp_path.iterdir()) == []  # no "--help" folder, no training
    r = subprocess.run(
        [sys.executable, "-m", "dashboard.demo.build", "--bogus"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr and list(tmp_path.iterdir()) == []
