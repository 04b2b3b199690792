"""Sweep kind `wsd`: per model one stable run and cooldown branches from its checkpoints. Plans and
their errors (exit 2 naming the key); a local launch that starts each branch at its checkpoint,
whose first losses are the stable run's, that a rerun leaves alone, and whose status counts the
shared prefix once."""

from __future__ import annotations

import json

import pytest

from tests.helpers import metrics, prepared_data, requires_corpus, scalelab, summary, write_base, write_spec
from tests.unit.launch.test_sweep_wsd import SET, WSD, base  # noqa: F401 (shared with the unit tests)

pytestmark = requires_corpus  # its fixtures train on the bundled corpus


def test_plan_shows_the_saving(base, work):
    path = write_spec(work, {"name": "wp", "base": str(base), "set": SET, "kind": "wsd", "wsd": WSD})
    r = scalelab("sweep", "plan", path)
    assert r.returncode == 0, r.stderr
    assert "3 runs (wsd)" in r.stdout and "branches from" in r.stdout
    rows = {ln.split()[0]: ln for ln in r.stdout.splitlines() if ln.startswith("n50k-")}
    assert rows["n50k-d2.05k"].endswith("n50k-stable step 6") and rows["n50k-d4.1k"].endswith("n50k-stable step 13")
    assert rows["n50k-stable"].rstrip().endswith("-")
    js = scalelab("sweep", "plan", path, "--format", "json")
    assert [x["branch_from"] for x in json.loads(js.stdout)] == [None, "n50k-stable step 6", "n50k-stable step 13"]
    # shared: 6 + 13 of the (8 + 16 + 32) planned steps
    assert (
        "compute: " in r.stdout
        and "with each stable prefix counted once" in r.stdout
        and f"{round(100 * 19 / 56)}%)" in r.stdout
    )


def test_bad_wsd_specs_exit_2_naming_the_key(base, work):
    cases = [
        ({**WSD, "fractions": [0.0, 0.5]}, "wsd.fractions: each fraction of D_max must lie in (0, 1]"),
        ({**WSD, "fractions": [1.5]}, "wsd.fractions: each fraction"),
        ({**WSD, "fractions": [0.3]}, "wsd.fractions: 0.3 x 32 steps"),
        ({**WSD, "fractions": [0.5, 0.5]}, "wsd.fractions: fractions repeat"),
        (
            {**WSD, "cooldown": None, "cooldown_steps": 8, "fractions": [0.25]},
            "wsd.cooldown_steps: the branch at fraction 0.25 has 8 steps",
        ),
        (
            {**WSD, "cooldown": None, "cooldown_steps": 7, "fractions": [0.25]},
            "would branch at step 1, inside the warmup",
        ),
        ({**WSD, "cooldown": 0.2, "cooldown_steps": 3}, "`cooldown`"),
        ({**WSD, "cooldown": 1.0}, "wsd.cooldown"),
        ({**WSD, "warmup_steps": 30}, "wsd.cooldown: the stable run of n50k has 32 steps"),
        ({**WSD, "shape": "sqrt"}, "wsd.shape: unknown key"),
    ]
    for i, (wsd, msg) in enumerate(cases):
        path = write_spec(work, {"name": f"b{i}", "base": str(base), "set": SET, "kind": "wsd", "wsd": wsd})
        r = scalelab("sweep", "plan", path)
        assert r.returncode == 2 and msg in r.stderr, (wsd, r.stderr)
    path = write_spec(
        work, {"name": "seeded", "base": str(base), "set": SET, "kind": "wsd", "wsd": WSD, "seeds": [0, 1]}
    )
    r = scalelab("sweep", "plan", path)
    assert r.returncode == 2 and "seeds: kind wsd" in r.stderr


# ------------------------------------------------------------------ local launch (trains: slow)
@pytest.fixture(scope="module")
def data():
    return prepared_data()


def launch_spec(work, data, **wsd):
    base = write_base(work / "base", data, log_every_steps=1, checkpoint_every_steps=4)
    return write_spec(
        work,
        {
            "name": "wl",
            "base": str(base),
            "set": SET,
            "kind": "wsd",
            "runs_dir": str(work / "runs"),
            "wsd": {**WSD, "tokens": 16384, "fractions": [0.125, 0.25, 1.0], **wsd},
        },
    )


@pytest.mark.slow
def test_local_launch_branches_at_their_checkpoints_then_idempotent(work, data):
    spec = launch_spec(work, data)
    r = scalelab("sweep", "launch", spec, "--workers", "2", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    at = {tuple(ln.split()[:2]): i for i, ln in enumerate(lines) if ln.startswith(("start", "done"))}
    # a branch starts once its checkpoint exists, while the stable run (64 steps) still trains
    assert at[("start", "n50k-d2.05k")] < at[("done", "n50k-stable")], r.stdout
    runs = work / "runs"
    stable = metrics(runs / "n50k-stable")
    by_step = {m["step"]: m for m in stable}
    for name, steps, point in (("n50k-d2.05k", 8, 6), ("n50k-d4.1k", 16, 13)):
        s = summary(runs / name)
        assert s["status"] == "done" and s["steps"] == steps and s["tokens"] == steps * 256
        assert s["init_from"] == {"run": str((runs / "n50k-stable").resolve()), "step": point}
        assert s["shared_tokens"] == point * 256 and s["shared_flops"] == pytest.approx(point / steps * s["flops"])
        own = metrics(runs / name)
        assert own[0]["step"] == point + 1
        # step N+1's loss is measured on the weights after step N: the same in the branch and the stable run
        assert own[0]["loss"] == by_step[point + 1]["loss"]
        assert own[-1]["lr"] < by_step[steps]["lr"]  # cooled down where the stable run is still at its peak
    assert summary(runs / "n50k-stable")["status"] == "done"
    # accounting: each stable prefix counted once; every run's end is one (N, D, loss) point
    flops = {n: summary(runs / n)["flops"] for n in ("n50k-stable", "n50k-d2.05k", "n50k-d4.1k")}
    separate, computed = sum(flops.values()), sum(flops.values()) * (1 - 19 / 88)  # shared: 6 + 13 of 8 + 16 + 64 steps
    st = scalelab("sweep", "status", spec, cwd=work)
    assert st.returncode == 0 and "wl: 3 done" in st.stdout, st.stdout + st.stderr
    assert (
        f"compute: {computed:.3g} FLOPs with each stable prefix counted once, {separate:.3g} as separate runs "
        f"(saving {separate - computed:.3g}, 22%); finished runs computed {computed:.3g}"
    ) in st.stdout, st.stdout
    ls = scalelab("runs", "list", runs, cwd=work)
    assert (
        f"compute: {computed:.3g} FLOPs with shared prefixes counted once ({separate:.3g} as separate runs" in ls.stdout
    ), ls.stdout
    from scaling.data.inputs import read_run_dirs

    df, _ = read_run_dirs(runs)
    pts = df.sort_values("D")
    assert list(pts["D"]) == [2048, 4096, 16384] and list(pts["run"]) == ["n50k-d2.05k", "n50k-d4.1k", "n50k-stable"]
    assert list(pts["branch_of"].fillna("")) == [str((runs / "n50k-stable").resolve())] * 2 + [""]
    assert list(pts["loss"]) == [summary(runs / n)["final_val_loss"] for n in pts["run"]]
    mtimes = {p: p.stat().st_mtime for p in runs.glob("*/summary.json")}
    r = scalelab("sweep", "launch", spec, "--workers", "2", cwd=work)
    assert r.returncode == 0 and "0 to run" in r.stdout and r.stdout.count(": done") == 3, r.stdout
    assert mtimes == {p: p.stat().st_mtime for p in runs.glob("*/summary.json")}


@pytest.mark.slow
def test_branches_of_a_stable_run_finished_earlier_start_at_once(work, data):
    spec = launch_spec(work, data, fractions=[0.25, 1.0])
    r = scalelab("sweep", "launch", spec, "--only", "n50k-stable", cwd=work)
    assert r.returncode == 0 and "1 done" in r.stdout, r.stdout + r.stderr
    r = scalelab("sweep", "launch", spec, cwd=work)
    assert r.returncode == 0 and "1 to run, 1 skipped" in r.stdout and "n50k-d4.1k: done" not in r.stdout, r.stdout
    s = summary(work / "runs" / "n50k-d4.1k")
    assert s["status"] == "done" and s["init_from"]["step"] == 13


@pytest.mark.slow
def test_branch_without_its_parent_fails_naming_the_checkpoint(work, data):
    spec = launch_spec(work, data)
    r = scalelab("sweep", "launch", spec, "--only", "n50k-d2.05k", cwd=work)
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        "FAILED n50k-d2.05k: waits for" in r.stdout
        and "n50k-stable/checkpoints/step_6, which will not be written" in r.stdout
    )
    assert not (work / "runs" / "n50k-d2.05k" / "summary.json").exists()


# ------------------------------------------------------------------ Slurm: branches as dependent job arrays
def test_slurm_dry_run_puts_branches_after_their_parent(work, base):
    spec = write_spec(
        work,
        {
            "name": "wsl",
            "base": str(base),
            "set": SET,
            "kind": "wsd",
            "runs_dir": str(work / "runs"),
            "wsd": {**WSD, "models": ["n25k", "n50k"]},
            "executor": {"slurm": {"cpus_per_task": 1}},
        },
    )
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", "--dry-run", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "--array=0-1" in r.stdout and r.stdout.count("--array=0-1\n") == 3  # the stable runs, then 2 branches each
    for parent in ("n25k-stable", "n50k-stable"):
        assert f"# branches of {parent}, after its task ends well:" in r.stdout
        assert f"--dependency=afterok:<task of {parent}>" in r.stdout


@pytest.fixture(scope="module")
def cluster():
    import shutil
    import subprocess

    from tests.helpers.ci_gate import unavailable

    if shutil.which("sbatch") is None:
        unavailable("slurm", "Slurm client (sbatch) not installed: run .ci/slurm_up.sh")
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True)
    if r.returncode != 0 or not any(s.rstrip("*") in ("idle", "mix", "alloc") for s in r.stdout.split()):
        unavailable(
            "slurm", f"no usable Slurm node (sinfo: {r.stdout.strip() or r.stderr.strip()}): run .ci/slurm_up.sh"
        )
    return True


@pytest.mark.slow
def test_slurm_branches_run_after_their_stable_task(cluster, work, data):
    import json
    import re
    import time

    base = write_base(work / "base", data, log_every_steps=1, checkpoint_every_steps=8)
    spec = write_spec(
        work,
        {
            "name": "wslurm",
            "base": str(base),
            "set": SET,
            "kind": "wsd",
            "runs_dir": str(work / "runs"),
            "wsd": WSD,
            "executor": {"slurm": {"cpus_per_task": 1, "time": "00:20:00"}},
        },
    )
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    stable_job = re.search(r"submitted job array (\d+) \(1 tasks", r.stdout).group(1)
    assert (
        "submitted branch job array " in r.stdout
        and f"(2 tasks, afterok:{stable_job}_0: after n50k-stable ends)" in r.stdout
    )
    t0, rows = time.time(), []
    while time.time() - t0 < 600:
        rows = json.loads(scalelab("sweep", "status", spec, "--format", "json").stdout)
        if all(x["state"] in ("done", "failed") for x in rows):
            break
        time.sleep(2)
    assert [x["state"] for x in rows] == ["done"] * 3, rows
    runs = work / "runs"
    stable_end = summary(runs / "n50k-stable")["finished_at"]
    for name, point in (("n50k-d2.05k", 6), ("n50k-d4.1k", 13)):
        s = summary(runs / name)
        assert s["init_from"]["step"] == point and s["shared_tokens"] == point * 256
        assert (
            metrics(runs / name)[0]["loss"] == {m["step"]: m for m in metrics(runs / "n50k-stable")}[point + 1]["loss"]
        )
        assert s["finished_at"] > stable_end  # afterok: the branch ran after its stable task
    again = scalelab("sweep", "launch", spec, "--executor", "slurm", cwd=work)
    assert again.returncode == 0 and "nothing to submit" in again.stdout, again.stdout


@pytest.mark.slow
def test_a_stopped_wsd_launch_resumes_stable_run_and_branches(work, data):
    import subprocess
    import sys
    import time

    base = write_base(work / "base", data, log_every_steps=1, checkpoint_every_steps=20)
    spec = write_spec(
        work,
        {
            "name": "wstop",
            "base": str(base),
            "set": SET,
            "kind": "wsd",
            "runs_dir": str(work / "runs"),
            # 1000 steps; a branch of 500 steps from step 300 (a long cooldown: time to stop it mid-way)
            "wsd": {**WSD, "tokens": 256000, "fractions": [0.5, 1.0], "cooldown": 0.4},
        },
    )
    stable, branch = work / "runs" / "n50k-stable", work / "runs" / "n50k-d128k"
    a = subprocess.Popen(
        [sys.executable, "-m", "launch.cli", "sweep", "launch", str(spec), "--workers", "2", "--no-progress"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        t0 = time.time()
        while not ((branch / "metrics.jsonl").exists() and metrics(branch)):
            assert time.time() - t0 < 240 and a.poll() is None, "the branch never started"
            time.sleep(0.2)
        c = scalelab("sweep", "cancel", spec)
        assert c.returncode == 0, c.stdout + c.stderr
        out, _ = a.communicate(timeout=120)
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 3 and summary(stable)["status"] == "preempted", out
    assert summary(branch)["status"] == "preempted", out
    r = scalelab("sweep", "launch", spec, "--workers", "2", cwd=work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [m["step"] for m in metrics(stable)] == list(
        range(1, 1001)
    )  # resumed from its stop checkpoint: nothing lost
    s = summary(branch)
    assert s["status"] == "done" and s["steps"] == 500 and s["init_from"]["step"] == 300
    assert [m["step"] for m in metrics(branch)] == list(range(301, 501))
