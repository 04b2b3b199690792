"""The dashboard in a real browser (Debian Chromium via Playwright) on a real tiny sweep.

One set of inputs per module (3 dense runs and 2 MoE runs from `scalelab train`, a WSD sweep from
`scalelab sweep launch`, evals from `scalelab eval`, fit records from `scalelab fit`, two broken run
dirs; each command run in this process, as the suite runs the CLI elsewhere) and one `scalelab
dashboard` server per module, started as a subprocess on a free port.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import REPO, requires_corpus
from tests.helpers.ci_gate import unavailable

pytestmark = requires_corpus  # its fixtures train on the bundled corpus

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
try:
    from playwright import sync_api as playwright_api
except ImportError:
    playwright_api = None


@pytest.fixture(scope="module", autouse=True)
def _browser_available():
    """Skipped with the reason in a developer's `make test`; a failure in CI
    (SCALELAB_REQUIRE, tests/helpers/ci_gate.py)."""
    if not os.path.exists(CHROMIUM):
        unavailable(
            "browser", f"{CHROMIUM} not installed (run .ci/browser_up.sh: apt-get install chromium chromium-driver)"
        )
    if playwright_api is None:
        unavailable("browser", "python package 'playwright' not installed")


def _in_process(args: list[str], env: dict) -> tuple[int, str]:
    """dashboard.demo.build's runner: the command in this process (no torch/DeepSpeed/lm-eval start-up per
    command), its stdout and stderr as one output."""
    from tests.helpers import inprocess

    r = inprocess.run(args, REPO, env)
    return r.returncode, r.stdout + r.stderr


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from dashboard.demo.build import make

    # SCALELAB_DASHBOARD_DEMO=DIR reuses (or fills) a demo tree between local test runs
    return make(os.environ.get("SCALELAB_DASHBOARD_DEMO") or tmp_path_factory.mktemp("dash"), runner=_in_process)


@pytest.fixture(scope="module")
def server(demo):
    exe = Path(sys.executable).with_name("scalelab")
    proc = subprocess.Popen(
        [str(exe), "dashboard", "--runs", str(demo["runs"]), "--fits", str(demo["fits"]), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    line = proc.stdout.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    assert m, f"no URL printed: {line!r}"
    url = m.group(0)
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "api/runs", timeout=2)
            break
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    pg = ctx.new_page()
    pg.errors = []
    pg.on("console", lambda m: pg.errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    pg.on("requestfailed", lambda r: pg.errors.append(f"request failed: {r.url}"))
    yield pg
    ctx.close()


def _open(page, url, view, wait):
    page.goto(f"{url}#{view}")
    page.wait_for_selector(wait, timeout=20000)


def _traces(page, div_id):
    return page.eval_on_selector(f"#{div_id}", "d => (d.data || []).length")


def test_runs_table_rows_sort_filter_and_problems(page, server, demo):
    _open(page, server, "runs", "#runs-table tbody tr")
    ids = page.eval_on_selector_all("#runs-table tbody tr", "rs => rs.map(r => r.dataset.id)")
    assert sorted(ids) == sorted(demo["ids"])
    # sorting: click the N column twice -> descending params
    page.click("#runs-table th[data-key=params]")
    page.click("#runs-table th[data-key=params]")
    ns = page.eval_on_selector_all(
        "#runs-table tbody td[data-key=params]", "tds => tds.map(t => Number(t.textContent))"
    )
    assert ns == sorted(ns, reverse=True) and ns[0] > ns[-1]
    # filtering: text and a numeric expression
    page.fill("#filter", "n50k-lr")
    assert page.locator("#runs-table tbody tr").count() == 2
    page.fill("#filter", "lr>0.005")
    assert page.eval_on_selector_all("#runs-table tbody tr", "rs => rs.map(r => r.dataset.id)") == [
        "tiny-sweep/n50k-lr1e-2"
    ]
    # the optimizer column: the demo's runs train with adamw (the default; a config without optim.name too)
    assert set(
        page.eval_on_selector_all("#runs-table tbody td[data-key=optim]", "tds => tds.map(t => t.textContent)")
    ) == {"adamw"}
    page.fill("#filter", "optim=muon")
    assert page.locator("#runs-table tbody tr").count() == 0
    page.fill("#filter", "")
    assert page.locator("#runs-table tbody tr").count() == len(demo["ids"])
    # broken run directories are listed with the reason
    probs = page.inner_text("#problems")
    for rid in demo["broken"]:
        assert rid in probs
    assert "summary.json unreadable" in probs
    assert page.errors == []


def test_selecting_runs_draws_curves(page, server, demo):
    _open(page, server, "runs", "#runs-table tbody tr")
    for rid in demo["ids"][:2]:
        page.check(f'#runs-table tr[data-id="{rid}"] input.sel')
    page.click("#plot-selected")
    page.wait_for_selector("#plot-loss .scatterlayer .trace", timeout=20000)
    for div in ("plot-loss", "plot-val_loss", "plot-lr"):
        assert _traces(page, div) == 2
        assert page.locator(f"#{div} .scatterlayer .trace").count() == 2
    page.check(f'#curve-runs input[value="{demo["ids"][2]}"]')
    page.wait_for_function("() => document.getElementById('plot-loss').data.length === 3")
    # x axis, log axes and smoothing redraw without errors
    page.select_option("#xaxis", "flops")
    page.check("#logx")
    page.fill("#smooth", "0.9")
    page.dispatch_event("#smooth", "input")
    assert page.eval_on_selector("#plot-loss", "d => d.layout.xaxis.type") == "log"
    assert page.locator("#plot-loss .modebar").count() == 1  # PNG/SVG export lives in the mode bar
    for fmt in ("png", "svg"):  # what the mode bar's export buttons call
        uri = page.evaluate(
            f"() => Plotly.toImage(document.getElementById('plot-loss'), {{format: '{fmt}', width: 400, height: 300}})"
        )
        assert uri.startswith(f"data:image/{fmt}"), uri[:40]
    with page.expect_download() as dl:
        page.click("text=curves CSV")
    assert dl.value.suggested_filename == "curves.csv"
    assert page.errors == []


def test_curves_draw_a_stable_run_with_its_branches(page, server, demo):
    """A real wsd sweep: the runs table names each branch's parent and step; selecting one branch
    draws its stable run and every branch, joined at their branch points, in one colour family."""
    stable = next(rid for rid, p in demo["wsd"].items() if p is None)
    branches = {rid: p for rid, p in demo["wsd"].items() if p}
    _open(page, server, "runs", "#runs-table tbody tr")
    for rid, (parent, step) in branches.items():
        assert (
            page.inner_text(f'#runs-table tr[data-id="{rid}"] td[data-key=branch_of]')
            == f"{parent.split('/')[-1]} step {step}"
        )
    assert page.inner_text(f'#runs-table tr[data-id="{stable}"] td[data-key=branch_of]') == ""
    first = sorted(branches)[0]
    page.check(f'#runs-table tr[data-id="{first}"] input.sel')
    page.click("#plot-selected")
    page.wait_for_function(
        "() => ((document.getElementById('plot-loss') || {}).data || []).length === 4"
    )  # 3 runs + branch points
    page.select_option("#xaxis", "tokens")
    page.wait_for_function("() => document.getElementById('plot-loss').layout.xaxis.title.text === 'tokens'")
    traces = page.eval_on_selector(
        "#plot-loss",
        "d => d.data.map(t => ({x: t.x, y: t.y, meta: t.meta, color: (t.line || {}).color, "
        "mcolor: t.marker.color, group: t.legendgroup}))",
    )
    assert page.locator("#plot-loss .scatterlayer .trace").count() == 4
    by = {t["meta"].get("run", t["meta"]["role"]): t for t in traces}
    assert by[stable]["meta"]["role"] == "stable" and {by[b]["meta"]["role"] for b in branches} == {"branch"}
    assert {t["group"] for t in traces} == {stable} and by["branch_points"]["mcolor"] == by[stable]["color"]
    assert len({by[b]["color"] for b in [stable, *branches]}) == 3  # shades of one hue
    on_stable = dict(zip(by[stable]["x"], by[stable]["y"]))
    for b in branches:
        x0, y0 = by[b]["x"][0], by[b]["y"][0]
        assert on_stable[x0] == y0  # the branch starts on the stable curve, at its branch point
        assert x0 in by["branch_points"]["x"] and by[b]["x"][-1] < by[stable]["x"][-1]
    page.uncheck("#with-branches")
    page.wait_for_function("() => document.getElementById('plot-loss').data.length === 1")
    assert page.errors == []


def test_evals_matrix(page, server, demo):
    _open(page, server, "evals", "#eval-matrix tbody tr")
    heads = page.eval_on_selector_all("#eval-matrix th", "ths => ths.map(t => t.textContent)")
    evaluated = [demo["ids"][0], demo["ids"][2]]
    assert all(any(h.startswith(r) for h in heads) for r in evaluated)
    tasks = page.eval_on_selector_all("#eval-matrix td[data-key=task]", "tds => tds.map(t => t.textContent)")
    assert "blimp_anaphor_gender_agreement" in tasks
    assert "±" in page.inner_text("#eval-matrix")
    page.click(f'#eval-matrix th[data-key="{evaluated[0]}"]')
    page.wait_for_selector("#plot-eval-flops .scatterlayer .trace")
    assert _traces(page, "plot-eval-flops") == 2
    assert page.errors == []


def test_scaling_view_renders_fits(page, server, demo):
    _open(page, server, "scaling?fit=chinchilla-a3.json", "#scaling-frontier .scatterlayer .trace")
    assert "alpha" in page.inner_text("#fit-params")
    for fid in ("loss_vs_n", "isoflop", "frontier"):
        assert _traces(page, f"scaling-{fid}") >= 2
    names = page.eval_on_selector("#scaling-frontier", "d => d.data.map(t => t.name)")
    assert "extrapolation" in names and any("interval" in n for n in names)
    page.select_option("#fit-select", "chinchilla-a2.json")
    page.wait_for_function(
        "() => (document.getElementById('scaling-frontier')?.data || []).some(t => t.name === 'per-budget optimum')"
    )
    page.select_option("#fit-select", "batch-lr.json")
    page.wait_for_selector("#scaling-opt_lr .scatterlayer .trace")
    assert _traces(page, "scaling-loss_vs_lr") >= 3
    assert "not-a-fit.json" in page.inner_text("#problems")
    assert page.errors == []


def test_scaling_view_shows_laws_per_optimizer(page, server, demo):
    _open(page, server, "scaling?fit=chinchilla-by-optimizer.json", "#scaling-by_frontier .scatterlayer .trace")
    assert page.input_value("#fit-group") == "adamw" and page.inner_text("#fit-by") == "optimizer"
    table = page.inner_text("#fit-compare")
    assert "compute multiplier over adamw" in table and "muon" in table and "largest compute of its runs" in table
    names = page.eval_on_selector("#scaling-by_frontier", "d => d.data.map(t => t.name)")
    assert {"adamw L*(C)", "muon L*(C)"} <= set(names) and any(n.startswith("adamw needs ×") for n in names)
    page.select_option("#fit-group", "muon")
    page.wait_for_function(
        "() => document.querySelector('#fit-params') && document.getElementById('fit-group').value === 'muon'"
    )
    assert "alpha" in page.inner_text("#fit-params") and _traces(page, "scaling-frontier") >= 2
    assert page.errors == []


def test_moe_view(page, server, demo):
    _open(page, server, "moe", "#moe-load_layer0 .heatmaplayer, #moe-load_layer0 .hm")
    assert page.eval_on_selector("#moe-load_layer0", "d => d.data[0].type") == "heatmap"
    assert page.eval_on_selector("#moe-load_layer0", "d => d.data[0].z.length") == 8  # experts
    for fid in ("imbalance", "dropped_frac", "imbalance_micro", "load_entropy", "active_experts", "k_distribution"):
        assert _traces(page, f"moe-{fid}") >= 1
    moe_runs = [r for r in demo["ids"] if r.startswith("tiny-moe/")]
    assert _traces(page, "moe-compare_imbalance") == len(moe_runs)  # one trace per router/run
    page.select_option("#moe-run", moe_runs[-1])
    page.wait_for_function(
        "() => document.querySelector('#moe-plots .plot') && document.getElementById('moe-load_layer0').data"
    )
    assert page.errors == []


def test_profile_view_step_time_and_memory(page, server, demo):
    """Real runs' time/* and mem/* records: stacked phases with the communication line, CPU peak RSS."""
    _open(page, server, "profile?run=" + demo["ids"][0], "#profile-time .barlayer")
    metas = page.eval_on_selector("#profile-time", "d => d.data.map(t => t.meta)")
    assert metas == ["time/data_s", "time/fwd_bwd_s", "time/optim_s", "other", "time/comm_s"]
    assert page.eval_on_selector("#profile-memory", "d => d.data.map(t => t.meta)") == ["mem/max_rss_gb"]
    page.select_option("#profile-run", "tiny-moe/moe-n50k")
    page.wait_for_function(
        "() => (document.getElementById('profile-time')?.data || [])[1]?.x.length > 0 "
        "&& location.hash.length > 0 && document.getElementById('profile-info').textContent"
    )
    assert page.errors == []


def _names(page, div_id):
    return page.eval_on_selector(f"#{div_id}", "d => d.data.map(t => t.name)")


def _exports(page, div_id):
    for fmt in ("png", "svg"):  # what the mode bar's PNG/SVG buttons call
        uri = page.evaluate(
            f"() => Plotly.toImage(document.getElementById('{div_id}'), {{format: '{fmt}', width: 400, height: 300}})"
        )
        assert uri.startswith(f"data:image/{fmt}"), uri[:40]


def test_moe_view_loss_vs_compute_and_the_fitted_law(page, server, demo):
    _open(page, server, "moe?fit=moe-krajewski.json", "#moe-moe_law .scatterlayer .trace")
    runs = {t["name"]: len(t["x"]) for t in page.eval_on_selector("#moe-moe_loss_vs_compute", "d => d.data")}
    assert runs == {"dense": 3 + len(demo["wsd"]), "E=8": 2}  # the demo's real dense (the wsd sweep's too) and MoE runs
    names = _names(page, "moe-moe_law")
    assert {f"law L_opt(C), G={g}" for g in (1, 2, 4, 8)} <= set(names) and "extrapolation" in names
    assert "95% interval (bootstrap)" in names and {"dense", "E=16", "E=32", "E=64"} <= set(names)
    assert page.locator("#moe-fit-params tbody tr").count() == 7 and _traces(page, "moe-moe_parity") == 5
    page.select_option("#moe-color", "granularity")
    page.wait_for_function("() => document.getElementById('moe-moe_law').data.some(t => t.name === 'G=2')")
    page.select_option("#moe-fit", "moe-clark.json")
    page.wait_for_function(
        "() => (document.getElementById('moe-moe_law')?.data || []).some(t => t.name === 'law E=16')"
    )
    _exports(page, "moe-moe_law")
    page.select_option("#moe-fit", "")
    page.wait_for_function("() => !document.getElementById('moe-moe_law')")
    assert page.locator("#moe-moe_loss_vs_compute .scatterlayer .trace").count() == 2
    assert page.errors == []


def test_plan_view_cost_against_loss_and_pareto(page, server, demo):
    _open(page, server, "plan?device=h100-sxm&usd-per-device-hour=2.5", "#plan-plan_cost_loss .scatterlayer .trace")
    assert _names(page, "plan-plan_cost_loss") == [
        "planned run, 95% prediction interval",
        "Pareto front",
        "continuous optimum N_opt, D_opt",
    ]
    assert page.eval_on_selector("#plan-plan_cost_loss", "d => d.layout.xaxis.title.text") == "cost (USD)"
    assert page.locator("#plan-table tbody tr").count() == 13
    # each budget's verdict marks its row, and the summary above the table counts the marked ones
    marked = page.locator("#plan-table td[data-key=verdict] .error").count()
    summary = page.inner_text("#plan-verdict")
    assert (f"not identified at {marked} of 13 budgets" in summary) if marked else ("identified at all 13" in summary)
    assert (
        page.input_value("#plan-device") == "h100-sxm"
        and page.input_value("#plan-precision") == "bf16"
        and page.input_value("#plan-mfu") == ""
    )
    # mfu auto with no finished runs on the device: each budget's run is priced at the step-time model's MFU for
    # its searched layout, as `scalelab plan FIT --compute C --device h100-sxm` prices it, and says so
    text = page.inner_text("#plan-assumptions")
    assert "h100-sxm × 1" in text and "predicted" in text and "by the step-time model" in text, text
    mfus = [float(t) for t in page.locator("#plan-table td[data-key=mfu]").all_inner_texts()]
    assert len(mfus) == 13 and all(0.05 < m < 0.8 for m in mfus) and len(set(mfus)) > 1, mfus
    assert "step-time model" in page.get_attribute("#plan-table tbody tr:first-child td[data-key=mfu] span", "title")
    page.fill("#plan-mfu", "0.4")  # a given MFU overrides the model, as --mfu does
    page.dispatch_event("#plan-mfu", "change")
    page.wait_for_function("() => document.getElementById('plan-assumptions').innerText.includes('MFU 0.4 ')")
    days = lambda: float(page.inner_text("#plan-table tbody tr:first-child td[data-key=days]"))  # noqa: E731
    one = days()
    page.fill("#plan-num-devices", "8")
    page.dispatch_event("#plan-num-devices", "change")
    page.wait_for_function("() => document.getElementById('plan-assumptions').innerText.includes('× 8')")
    assert days() == pytest.approx(one / 8, rel=1e-3)
    with page.expect_download() as dl:
        page.click("text=plan CSV")
    assert dl.value.suggested_filename == "plan-chinchilla-a3.csv"
    assert len(Path(dl.value.path()).read_text().splitlines()) == 14
    _exports(page, "plan-plan_cost_loss")
    page.select_option("#plan-x", "device_hours")
    page.wait_for_function(
        "() => document.getElementById('plan-plan_cost_loss').layout.xaxis.title.text === 'device-hours'"
    )
    assert page.errors == []
    page.fill("#plan-mfu", "2")
    page.dispatch_event("#plan-mfu", "change")
    page.wait_for_selector("#plan-error")
    assert "--mfu must be 'auto' or a number in (0, 1]" in page.inner_text("#plan-error")


def test_scaling_view_shows_the_accuracy_chain(page, server, demo):
    _open(page, server, "scaling?fit=accuracy.json", "#scaling-chain .scatterlayer .trace")
    assert page.eval_on_selector_all("#scaling-plots .plot", "ps => ps.map(p => p.id)") == [
        "scaling-task_loss",
        "scaling-accuracy",
        "scaling-chain",
    ]
    assert {"sigmoid fit", "chance 0.5", "evaluated runs", "95% interval (bootstrap of the sigmoid)"} <= set(
        _names(page, "scaling-accuracy")
    )
    assert "measured accuracy" in _names(page, "scaling-chain") and any(
        n.startswith("law N≈") for n in _names(page, "scaling-task_loss")
    )
    assert page.eval_on_selector_all("#fit-params tbody tr", "rs => rs.map(r => r.dataset.param)") == [
        "a",
        "b",
        "k",
        "L0",
    ]
    assert page.input_value("#fit-partner") == "task-loss.json"
    page.select_option("#fit-task", "synthetic_4choice")
    page.wait_for_function(
        "() => document.getElementById('scaling-accuracy')?.data?.some(t => t.name === 'chance 0.25')"
    )
    assert page.eval_on_selector("#scaling-chain", "d => d.layout.title.text").startswith("synthetic_4choice")
    page.select_option("#fit-partner", "none")
    page.wait_for_function("() => !document.getElementById('scaling-chain')")
    assert page.eval_on_selector_all("#scaling-plots .plot", "ps => ps.map(p => p.id)") == ["scaling-accuracy"]
    _exports(page, "scaling-accuracy")
    assert page.errors == []


def test_scaling_view_shows_lr_annealing_curves(page, server, demo):
    _open(page, server, "scaling?fit=lr-annealing.json", "#scaling-annealing_curves .scatterlayer .trace")
    names = _names(page, "scaling-annealing_curves")
    for run in ("constant", "wsd-linear", "wsd-sqrt", "cosine (held out)"):
        assert run in names and f"law: {run}" in names
    assert sum(n.endswith("95% interval") for n in names) == 4
    assert _names(page, "scaling-annealing_lr") == ["constant", "wsd-linear", "wsd-sqrt", "cosine (held out)"]
    assert "held out: law" in _names(page, "scaling-annealing_last")
    assert page.errors == []


def test_path_traversal_and_writes_refused(page, server):
    for path in (
        "api/curves?run=../../../etc/passwd",
        "api/curves?run=tiny-sweep%2F..%2F..%2Fetc",
        "api/fit?id=..%2Fruns%2Fx.json",
        "api/moe?run=%2Fetc%2Fpasswd",
    ):
        r = page.request.get(server + path)
        assert r.status == 400, path
        assert "refused" in r.json()["error"]
    assert page.request.get(server + "api/curves?run=no-such/run").status == 404
    assert page.request.get(server + "static/..%2F..%2F..%2Fsetup.py").status == 404
    assert page.request.post(server + "api/runs").status == 405
    csv = page.request.get(server + "api/runs.csv")
    assert csv.status == 200 and csv.text().splitlines()[0].startswith("id,sweep,run")
    assert "/tmp" not in page.request.get(server + "api/runs").text()  # no server paths leak


def test_host_header_checked_on_loopback(server):
    req = urllib.request.Request(server + "api/runs", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 400


def test_auto_refresh_shows_a_new_running_run(page, server, demo):
    """Runs appear and progress while a sweep writes them (last: it adds a run to the tree). The page's clock
    is moved on one auto-refresh (5 s) at a time instead of waiting for it."""

    def after_refreshes(cond: str, arg=None) -> None:
        for _ in range(12):
            page.clock.fast_forward(5000)  # the next auto-refresh, now
            try:
                page.wait_for_function(cond, arg=arg, timeout=1500)  # the server rescans at most once a second
                return
            except playwright_api.TimeoutError:
                pass
        raise AssertionError(f"not shown after 12 auto-refreshes: {cond}")

    page.clock.install()  # the page's timers, advanced by fast_forward (time also flows as usual)
    _open(page, server, "runs", "#runs-table tbody tr")
    src = Path(demo["runs"]) / demo["ids"][0]
    live = Path(demo["runs"]) / "tiny-sweep" / "live-run"
    live.mkdir()
    try:
        shutil.copy(src / "config.yaml", live / "config.yaml")
        lines = (src / "metrics.jsonl").read_text().splitlines(keepends=True)
        (live / "metrics.jsonl").write_text("".join(lines[:3]))
        after_refreshes("() => document.querySelector('#runs-table tr[data-id=\"tiny-sweep/live-run\"]') !== null")
        with open(live / "metrics.jsonl", "a") as f:
            f.write("".join(lines[3:6]))
        step = str(__import__("json").loads(lines[5])["step"])
        after_refreshes(
            's => document.querySelector(\'#runs-table tr[data-id="tiny-sweep/live-run"] '
            "td[data-key=status]').textContent.includes(s)",
            arg=step,
        )
        assert page.errors == []
    finally:
        shutil.rmtree(live)


# ------------------------------------------------------------------ confinement and degenerate fits
SECRET = "SECRET-OUTSIDE-THE-ROOTS"
SPACED = "tiny-sweep/n50k lr3e-3 (copy)"


def _serve(runs: Path, fits: Path):
    exe = Path(sys.executable).with_name("scalelab")
    proc = subprocess.Popen(
        [str(exe), "dashboard", "--runs", str(runs), "--fits", str(fits), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    m = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
    assert m, "no URL printed"
    for _ in range(100):
        try:
            urllib.request.urlopen(m.group(0) + "api/runs", timeout=2)
            break
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    return proc, m.group(0)


@pytest.fixture(scope="module")
def hostile(demo, tmp_path_factory):
    """A second server over roots that hold what a shared cluster disk can: a run directory named
    with spaces, runs and a fit record linking out of the roots, a fit whose `source` is outside,
    and a degenerate batch-lr fit (both exponents ~1e-16, from the real fitter)."""
    import scaling.synthetic.runs as syn
    from scaling.fits.batch_lr import fit_batch_lr
    from scaling.fits.chinchilla.approaches import fit_chinchilla
    from scaling.laws.hparams import ComputeHParamLaw

    base = tmp_path_factory.mktemp("hostile")
    runs, fits, outside = base / "runs", base / "fits", base / "outside"
    fits.mkdir()
    outside.mkdir()
    src = Path(demo["runs"]) / demo["ids"][0]
    ignore = shutil.ignore_patterns("checkpoints")
    shutil.copytree(src, runs / SPACED, ignore=ignore)
    (outside / "metrics.jsonl").write_text(f'{{"step": 0, "loss": 1.0, "note": "{SECRET}"}}\n')
    (outside / "summary.json").write_text(f'{{"status": "done", "steps": 1, "error": "{SECRET}"}}')
    (outside / "rec.json").write_text(f'{{"law": "kaplan", "params": {{"Nc": 1.0}}, "warnings": ["{SECRET}"]}}')
    for name, link in (("linked-metrics", "metrics.jsonl"), ("linked-summary", "summary.json")):
        d = runs / "tiny-sweep" / name
        shutil.copytree(src, d, ignore=ignore)
        (d / link).unlink()
        os.symlink(outside / link, d / link)
    os.symlink(outside / "rec.json", fits / "linked-record.json")
    iso = syn.chinchilla_table(budgets=(1e15, 1e16, 1e17), n_per_budget=5)
    iso.to_csv(outside / "isoflop.csv", index=False)
    fit_chinchilla(str(outside / "isoflop.csv"), approach=2).save(fits / "outside-source.json")
    flat = ComputeHParamLaw(lr_coef=3e-3, lr_exp_C=0.0, bs_coef=256.0, bs_exp_C=0.0)
    df = syn.batch_lr_sweep(flat, budgets=(1e15, 1e16, 1e17), lr_mults=(0.5, 1, 2), bs_mults=(0.5, 1, 2), noise=0.0)
    (fits / "data").mkdir()
    df.to_csv(fits / "data" / "flat.csv", index=False)
    rec = fit_batch_lr(str(fits / "data" / "flat.csv"))
    assert abs(rec["params"]["lr_exp_C"]) < 1e-9 and abs(rec["params"]["bs_exp_C"]) < 1e-9
    rec.save(fits / "degenerate-batch-lr.json")
    proc, url = _serve(runs, fits)
    yield {"url": url, "base": base}
    proc.terminate()
    proc.wait(timeout=10)


def _no_leaks(page, base):
    html = page.content()
    assert SECRET not in html and str(base) not in html


def test_confined_runs_view_and_spaced_run_plots(page, hostile):
    url, base = hostile["url"], hostile["base"]
    _open(page, url, "runs", "#runs-table tbody tr")
    ids = page.eval_on_selector_all("#runs-table tbody tr", "rs => rs.map(r => r.dataset.id)")
    assert ids == [SPACED]  # the runs whose files link out are not rows...
    probs = page.inner_text("#problems")  # ...but are listed with the reason
    assert "tiny-sweep/linked-metrics: metrics.jsonl links outside the served runs directory" in probs
    assert "tiny-sweep/linked-summary: summary.json links outside" in probs
    _no_leaks(page, base)
    page.check(f'#runs-table tr[data-id="{SPACED}"] input.sel')
    page.click("#plot-selected")
    page.wait_for_selector("#plot-loss .scatterlayer .trace", timeout=20000)
    assert _traces(page, "plot-loss") == 1
    assert page.eval_on_selector("#plot-loss", "d => d.data[0].x.length") > 3
    _no_leaks(page, base)
    for path in ("api/runs", "api/problems.csv", "api/fits", "api/curves?run=tiny-sweep/linked-metrics"):
        text = page.request.get(url + path).text()
        assert SECRET not in text and str(base) not in text, path
    assert page.errors == []


def test_fit_sources_and_records_outside_roots_not_read(page, hostile):
    url, base = hostile["url"], hostile["base"]
    _open(page, url, "scaling?fit=outside-source.json", "#fit-params tbody tr")
    page.wait_for_function(
        "() => document.getElementById('fit-info').innerText.includes('outside the served directories')"
    )
    assert "linked-record.json: links outside the served fits directory" in page.inner_text("#problems")
    opts = page.eval_on_selector_all("#fit-select option", "os => os.map(o => o.value)")
    assert "linked-record.json" not in opts
    _no_leaks(page, base)
    assert page.errors == []


def test_degenerate_fit_flagged_with_table_and_no_broken_axes(page, hostile):
    url = hostile["url"]
    _open(page, url, "scaling?fit=degenerate-batch-lr.json", "#fit-flag")
    flag = page.inner_text("#fit-flag")
    assert flag.startswith("not identified:") and "lr_exp_C = " in flag and "zero to rounding" in flag
    assert "not identified" in page.inner_text("#fit-select option:checked")
    params = page.eval_on_selector_all("#fit-params tbody tr", "rs => rs.map(r => r.dataset.param)")
    assert {"lr_exp_C", "lr_coef", "bs_exp_C", "bs_coef"} <= set(params)
    assert page.locator("#fit-params tr.flagged").count() >= 2
    # the law vs compute plots (flat to 1e-16: 0.00300000000000744 ticks, staircases) are not drawn
    assert page.locator("#scaling-opt_lr, #scaling-opt_batch_tokens").count() == 0
    page.wait_for_selector("#scaling-loss_vs_lr .scatterlayer .trace")  # the data still are
    names = page.eval_on_selector("#scaling-loss_vs_lr", "d => d.data.map(t => t.name)")
    assert "extrapolation" not in names and not any(n.startswith("fit ") for n in names)
    ticks = page.eval_on_selector_all(
        "#scaling-plots .xtick text, #scaling-plots .ytick text", "ts => ts.map(t => t.textContent)"
    )
    assert ticks and not any(re.search(r"0{6,}[1-9]", t) for t in ticks), ticks
    assert page.errors == []
