"""Fixtures and collection hooks for the whole suite; the helpers tests import live in tests/helpers.

Layout: tests/unit/<package>/ (no process started, no CLI, no training beyond a few in-process
steps: `make test-fast`) and tests/integration/<package>/ (drive the CLI, start processes, train,
Slurm, the browser). `make test` runs both under pytest-xdist.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.helpers.data import REPO, SHARED, data_root
from tests.helpers.ranks import TWO_RANK_TIMEOUT

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")  # plots are written to files, never shown
os.environ.setdefault("WANDB_MODE", "disabled")  # a test that logs to W&B says so (wandb.mode in its config wins)
if not any(Path("/dev").glob("nvidia[0-9]*")):
    os.environ.setdefault("DS_ACCELERATOR", "cpu")  # no accelerator probe in every process DeepSpeed starts
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Test workers share the cores: each computes with one thread (what it trains in process, and the
    # processes it starts unless they set their own count), so two workers do not oversubscribe two cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
# The tests oversubscribe the cores on purpose (two workers, sweeps with two slots, the determinism test's
# spinner): an OpenMP thread waiting at a barrier then sleeps instead of spinning on a core another process
# needs (the arithmetic is the same). test_determinism.py alone, ACTIVE against PASSIVE: 44 -> 22 s dense,
# 71 -> 29 s MoE.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Where tests run under pytest-xdist (`--dist loadgroup`): the tests of a module run in one worker
    when one of them builds something they share (a module-scoped fixture: a trained run, a served
    dashboard, the main job), so it is built once; every test that reads `two_rank_runs` runs in
    one worker (one launch trains them all); tests of the one-node Slurm cluster run one after
    another in one worker (its CPUs are the machine's: two sweeps queued at once wait on each other)."""

    def uses(item, name):
        return name in getattr(item, "fixturenames", ())

    def module_scoped(item):
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
        return any(d.scope == "module" for fixturedefs in defs.values() for d in fixturedefs)

    group: dict[str, str] = {}  # module -> its group
    for item in items:
        mod = item.module.__name__
        if uses(item, "two_rank_runs"):
            group[mod] = "two-ranks"
            item.add_marker(pytest.mark.timeout(TWO_RANK_TIMEOUT))  # whichever runs first trains them all
        elif uses(item, "cluster") or "slurm" in item.name:
            group.setdefault(mod, "slurm")
        elif module_scoped(item):
            group.setdefault(mod, mod)
    for item in items:
        mod = item.module.__name__
        if mod in group and (group[mod] != "slurm" or uses(item, "cluster") or "slurm" in item.name):
            item.add_marker(pytest.mark.xdist_group(group[mod]))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """pytest-xdist groups a test by a suffix of its node id (`@group`); pytest 9.2 moved the node id
    where xdist 3.8 cannot write it (pyproject pins pytest < 9.2). Fail loudly if the groups were
    lost again, instead of building every shared fixture once per worker."""
    if not getattr(session.config.option, "loadgroup", False):
        return
    grouped = [i for i in session.items if any(True for _ in i.iter_markers("xdist_group"))]
    if grouped and not any("@" in i.nodeid for i in grouped):
        raise pytest.UsageError(
            "pytest-xdist --dist loadgroup did not group the tests (the installed pytest "
            "and pytest-xdist disagree on node ids): install pytest < 9.2"
        )


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """The default corpus prepared once with a 512-token BPE (shared by every training test)."""
    if data_root() is None:
        pytest.skip("bundled corpus not found (set SCALELAB_DATA_ROOT)")
    from pretrain.data.load import load_data_config
    from pretrain.data.prepare import prepare

    out = tmp_path_factory.mktemp("data") / "tiny512"
    cfg = load_data_config(
        REPO / "configs/data/default.yaml", ["tokenizer.vocab_size=512", f"out_dir={out}", "name=tiny512"]
    )
    prepare(cfg, log=lambda m: None)
    return out


@pytest.fixture(scope="session")
def two_rank_runs(tiny_data, tmp_path_factory) -> dict[str, dict]:
    """Every 2-rank run the test modules registered (`two_rank_group`), trained in one launch."""
    from tests.helpers.ranks import train_groups

    return train_groups(tiny_data, tmp_path_factory.mktemp("two-ranks"))


@pytest.fixture()
def work():
    """A folder of its own under SHARED (tests/helpers/data.py) for a sweep test."""
    SHARED.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="run-", dir=SHARED))
    yield d
    shutil.rmtree(d, ignore_errors=True)
