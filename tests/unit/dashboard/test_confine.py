"""The dashboard reads only inside its served roots, never shows server paths, serves ids with
spaces, and flags fits that are not identified instead of drawing broken axes (HTTP level)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers import small_run

pytest.importorskip("httpx", reason="fastapi.testclient needs httpx")
from fastapi.testclient import TestClient

from dashboard.server import create_app
from dashboard.stores.fit_checks import not_identified

SECRET = "SECRET-OUTSIDE-THE-ROOTS"


@pytest.fixture
def tree(tmp_path):
    """runs/ and fits/ to serve, and outside/ (same disk, not served) holding files with SECRET."""
    runs, fits, outside = tmp_path / "runs", tmp_path / "fits", tmp_path / "outside"
    for p in (runs, fits, outside):
        p.mkdir()
    (outside / "metrics.jsonl").write_text(json.dumps({"step": 0, "loss": 1.0, "note": SECRET}) + "\n")
    (outside / "summary.json").write_text(json.dumps({"status": "done", "steps": 1, "run_id": SECRET, "error": SECRET}))
    (outside / "eval.json").write_text(json.dumps({"step": 1, "results": [{"task": SECRET, "value": 1.0}]}))
    (outside / "rec.json").write_text(json.dumps({"law": "kaplan", "params": {"Nc": 1.0}, "warnings": [SECRET]}))
    return runs, fits, outside


def _client(runs, fits):
    return TestClient(create_app(runs, fits, refresh_s=0))


def _every_response(c, run_ids=(), fit_ids=()):
    urls = [
        "/api/runs",
        "/api/runs.csv",
        "/api/problems.csv",
        "/api/evals",
        "/api/evals.csv",
        "/api/fits",
        "/api/moe/compare",
    ]
    urls += [f"/api/curves?run={r}" for r in run_ids] + [f"/api/curves.csv?run={r}" for r in run_ids]
    urls += [f"/api/fit?id={f}" for f in fit_ids] + [f"/api/fit.csv?id={f}" for f in fit_ids]
    return {u: c.get(u).text for u in urls}


def test_symlinks_out_of_the_runs_root_are_not_followed(tree):
    runs, fits, outside = tree
    small_run(runs, "s/ok")
    d = small_run(runs, "s/linked-metrics")
    (d / "metrics.jsonl").unlink()
    os.symlink(outside / "metrics.jsonl", d / "metrics.jsonl")
    d = small_run(runs, "s/linked-summary")
    (d / "summary.json").unlink()
    os.symlink(outside / "summary.json", d / "summary.json")
    d = small_run(runs, "s/linked-eval")
    (d / "evals").mkdir()
    os.symlink(outside / "eval.json", d / "evals" / "1.json")
    os.symlink(outside / "eval.json", small_run(runs, "s/linked-lock") / ".lock")  # the status probe would open it
    os.symlink(outside, runs / "s" / "linked-dir")  # a whole run dir that is a link out
    (outside / "config.yaml").write_text("model: {preset: n50k}\n")
    inside_link = small_run(runs, "s/linked-inside")  # a link that stays inside the root is fine
    (inside_link / "metrics.jsonl").unlink()
    os.symlink(runs / "s" / "ok" / "metrics.jsonl", inside_link / "metrics.jsonl")
    c = _client(runs, fits)
    body = c.get("/api/runs").json()
    rows = {r["id"]: r for r in body["runs"]}
    problems = {p["id"]: p["problem"] for p in body["problems"]}
    assert (
        "s/linked-summary" not in rows
        and "summary.json links outside the served runs directory" in problems["s/linked-summary"]
    )
    assert "metrics.jsonl links outside" in problems["s/linked-metrics"]
    assert "s/linked-dir" not in rows
    assert ".lock links outside" in problems["s/linked-lock"]
    assert rows["s/linked-eval"]["n_evals"] == 0
    assert c.get("/api/curves?run=s/linked-metrics").status_code == 404
    assert c.get("/api/curves?run=s/linked-inside").json()["runs"][0]["n_records"] == 3
    for url, text in _every_response(c, ["s/ok", "s/linked-eval", "s/linked-inside"]).items():
        assert SECRET not in text, url


def test_fit_source_outside_the_roots_is_not_read(tree):
    import scaling.synthetic.runs as syn
    from scaling.fits.chinchilla.approaches import fit_chinchilla

    runs, fits, outside = tree
    df = syn.chinchilla_table(budgets=(1e15, 1e16, 1e17), n_per_budget=5)
    for where in (outside, fits / "data"):
        where.mkdir(exist_ok=True)
        df.to_csv(where / "isoflop.csv", index=False)
    rec = fit_chinchilla(str(outside / "isoflop.csv"), approach=2)
    rec.save(fits / "outside-source.json")
    rec["source"] = str(fits / "data" / "isoflop.csv")
    rec.save(fits / "inside-source.json")
    rec["source"] = "data/isoflop.csv"  # relative: resolved against the record's folder
    rec.save(fits / "relative-source.json")
    rec["source"] = "../outside/isoflop.csv"
    rec.save(fits / "relative-outside.json")
    c = _client(runs, fits)
    out = c.get("/api/fit?id=outside-source.json").json()
    assert out["n_data_points"] == 0 and "outside the served directories" in out["points_note"]
    assert c.get("/api/fit?id=relative-outside.json").json()["n_data_points"] == 0
    for fid in ("inside-source.json", "relative-source.json"):
        d = c.get(f"/api/fit?id={fid}").json()
        assert d["n_data_points"] == len(df) and d["points_note"] is None, fid
    for url, text in _every_response(c, fit_ids=["outside-source.json", "inside-source.json"]).items():
        assert str(tree[0].parent) not in text, url


def test_fit_run_tree_that_links_out_is_refused(tree):
    runs, fits, outside = tree
    rec = {
        "law": "chinchilla",
        "approach": 2,
        "params": {"N_coef": 0.1, "a": 0.5, "D_coef": 1.0, "b": 0.5},
        "source": str(runs / "s"),
    }
    (fits / "tree.json").write_text(json.dumps(rec))
    small_run(runs, "s/ok")
    os.symlink(outside / "summary.json", runs / "s" / "ok2-summary.json")  # harmless name: not read
    d = runs / "s" / "sneaky"
    d.mkdir()
    os.symlink(outside / "summary.json", d / "summary.json")
    note = _client(runs, fits).get("/api/fit?id=tree.json").json()["points_note"]
    assert "links outside the served directories (sneaky/summary.json)" in note


def test_fit_record_symlinked_from_outside_is_not_read(tree):
    runs, fits, outside = tree
    os.symlink(outside / "rec.json", fits / "linked.json")
    c = _client(runs, fits)
    body = c.get("/api/fits").json()
    assert body["fits"] == [] and "links outside the served fits directory" in body["problems"][0]["problem"]
    assert c.get("/api/fit?id=linked.json").status_code == 404
    assert SECRET not in c.get("/api/fits").text + c.get("/api/problems.csv").text


def test_no_server_paths_in_responses(tree):
    runs, fits, _ = tree
    d = small_run(runs, "s/failed")
    (d / "summary.json").write_text(
        json.dumps(
            {"status": "failed", "steps": 1, "error": f"FileNotFoundError: {d}/data/x.bin and /home/u/secret/y.bin"}
        )
    )
    (fits / "r.json").write_text(
        json.dumps({"law": "kaplan", "params": {"Nc": 1.0}, "warnings": [f"run {runs}/s/failed: skipped"]})
    )
    c = _client(runs, fits)
    texts = _every_response(c, ["s/failed"], ["r.json"])
    for url, text in texts.items():
        assert str(runs.parent) not in text and "/home/u" not in text, url
    row = c.get("/api/runs").json()["runs"][0]
    assert row["error"] == "FileNotFoundError: s/failed/data/x.bin and <server path>"
    assert c.get("/api/fit?id=r.json").json()["record"]["warnings"] == ["run s/failed: skipped"]
    assert "does not exist" in _client(runs / "gone", fits).get("/api/runs").text
    assert str(runs) not in _client(runs / "gone", fits).get("/api/runs").text


def test_run_with_a_space_in_its_name_can_be_plotted(tree):
    runs, fits, _ = tree
    small_run(runs, "my sweep/run one (lr=3e-3)")
    c = _client(runs, fits)
    assert [r["id"] for r in c.get("/api/runs").json()["runs"]] == ["my sweep/run one (lr=3e-3)"]
    r = c.get("/api/curves", params={"run": "my sweep/run one (lr=3e-3)"})
    assert r.status_code == 200 and r.json()["runs"][0]["n_records"] == 3
    csv = c.get("/api/curves.csv", params={"run": "my sweep/run one (lr=3e-3)"})
    assert csv.status_code == 200 and csv.text.count("\n") == 4
    for bad in ("my sweep/../../outside", "/etc/passwd", "a\\b", "a\x00b", 'a"b', "a//b"):
        assert c.get("/api/curves", params={"run": bad}).status_code == 400, bad


def _degenerate_batch_lr(path: Path):
    """A real `fit_batch_lr` record whose optimum is the same (lr, batch) at every budget:
    both exponents come out ~1e-16, like the main job's batch/LR law."""
    import scaling.synthetic.runs as syn
    from scaling.fits.batch_lr import fit_batch_lr
    from scaling.laws.hparams import ComputeHParamLaw

    df = syn.batch_lr_sweep(
        ComputeHParamLaw(lr_coef=3e-3, lr_exp_C=0.0, bs_coef=256.0, bs_exp_C=0.0),
        budgets=(1e15, 1e16, 1e17),
        lr_mults=(0.5, 1, 2),
        bs_mults=(0.5, 1, 2),
        noise=0.0,
    )
    rec = fit_batch_lr(df)
    assert abs(rec["params"]["lr_exp_C"]) < 1e-9  # the degenerate case this test is about
    rec.save(path)
    return rec


def test_degenerate_fit_is_flagged_and_not_drawn(tree):
    import scaling.synthetic.runs as syn
    from scaling.fits.batch_lr import fit_batch_lr

    runs, fits, _ = tree
    _degenerate_batch_lr(fits / "degenerate.json")
    fit_batch_lr(
        syn.batch_lr_sweep(budgets=(1e15, 1e16, 1e17), lr_mults=(0.25, 0.5, 1, 2, 4), bs_mults=(0.5, 1, 2))
    ).save(fits / "good.json")
    c = _client(runs, fits)
    listed = {f["id"]: f["not_identified"] for f in c.get("/api/fits").json()["fits"]}
    assert listed == {"degenerate.json": True, "good.json": False}
    d = c.get("/api/fit?id=degenerate.json").json()
    assert any(f.startswith("lr_exp_C = ") and "zero to rounding" in f for f in d["not_identified"])
    assert any(f.startswith("bs_exp_C = ") for f in d["not_identified"])
    assert set(d["record"]["params"]) >= {"lr_exp_C", "lr_coef", "bs_exp_C", "bs_coef"}  # the table is still sent
    names = [t.get("name", "") for f in d["figures"] for t in f["data"]]
    assert not any(n == "extrapolation" or n.startswith("fit ") for n in names)
    assert {f["id"] for f in d["figures"]} == set() or all(f["id"] == "loss_vs_lr" for f in d["figures"])
    good = c.get("/api/fit?id=good.json").json()
    assert good["not_identified"] == [] and "extrapolation" in [
        t.get("name") for f in good["figures"] for t in f["data"]
    ]


def test_not_identified_reasons():
    # the quickstart's seed-1 batch-lr record (2 budgets, one optimum on the grid edge)
    rec = {
        "law": "batch-lr",
        "params": {"lr_exp_C": -0.2056, "lr_coef": 0.912, "bs_exp_C": 1.1607, "bs_coef": 2.48e-11},
        "intervals": {
            "lr_exp_C": [-0.3726, 0.7494],
            "lr_coef": [2.52e-11, 75.2],
            "bs_exp_C": [-2.7e-16, 2.2259],
            "bs_coef": [5.98e-45, 512.0],
        },
        "warnings": [
            "1 of 2 groups have their optimum on the edge of the lr "
            "or batch grid: the true optimum may lie outside the sweep"
        ],
    }
    reasons = not_identified(rec)
    assert [r.split(" ")[0] for r in reasons] == ["bs_coef's"]  # wide exponent intervals alone do not flag
    assert "spans 47 decades" in reasons[0]
    # the main job's approach-3 record: wide but finite intervals, drawn (its own warnings say "poorly identified")
    a3 = {
        "params": {"E": 2.71, "alpha": 1.68, "beta": 0.41},
        "intervals": {"E": [4.5e-5, 3.15], "alpha": [0.05, 5.0], "beta": [0.086, 0.886]},
        "warnings": [
            "alpha is poorly identified: its interval [0.0505, 5] spans a factor 99.1; the runs do not pin it down"
        ],
    }
    assert not_identified(a3) == []
    assert (
        not_identified(
            {
                "params": {"alpha": 0.34, "beta": 0.28},
                "intervals": {"alpha": [0.3, 0.38]},
                "warnings": ["alpha sat on its bound in 3 of 200 bootstrap resamples: ..."],
            }
        )
        == []
    )
    w = [
        "only one model size: bcrit_coef and bcrit_exp_N are not identified",
        "parameter e stopped on its bound (0; bounds [-5, 5])",
        "alpha sat on its bound in 150 of 200 bootstrap resamples: that end ...",
    ]
    assert not_identified({"params": {}, "warnings": w}) == w


def test_a_law_flat_to_rounding_gets_a_readable_axis(tmp_path):
    """Even when drawn (draw_fit=True), a curve flat to 1e-16 gets a padded axis range instead of
    autorange's 1e-16-wide one (ticks like 0.00300000000000744); a normal curve keeps autorange."""
    import scaling.synthetic.runs as syn
    from dashboard.views import scaling as scaling_view
    from scaling.fits.batch_lr import fit_batch_lr

    flat = {f["id"]: f for f in scaling_view.figures(_degenerate_batch_lr(tmp_path / "d.json"), [], draw_fit=True)}
    lo, hi = flat["opt_lr"]["layout"]["yaxis"]["range"]
    assert flat["opt_lr"]["layout"]["yaxis"]["type"] == "log" and hi - lo == pytest.approx(1.0)
    good = fit_batch_lr(
        syn.batch_lr_sweep(budgets=(1e15, 1e16, 1e17), lr_mults=(0.25, 0.5, 1, 2, 4), bs_mults=(0.5, 1, 2))
    )
    assert "range" not in {f["id"]: f for f in scaling_view.figures(good, [])}["opt_lr"]["layout"]["yaxis"]
    titles = [
        f["title"]
        for f in scaling_view.figures(
            _degenerate_batch_lr(tmp_path / "d.json"),
            [{"N": 1e6, "D": 1e8, "loss": 3.0, "lr": 3e-3, "batch_tokens": 256.0, "flops": 6e14}],
            draw_fit=False,
        )
    ]
    assert titles and all(t.endswith("fitted law not drawn (not identified)") for t in titles)
