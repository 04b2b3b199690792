"""Sweep specs: expansion of every kind (counts, stable names and ids, FLOPs = accounting),
invalid specs rejected with a message naming the problem, shipped example sweeps, and the
Slurm script the executor would submit (no training here: fast)."""

from __future__ import annotations

from tests.helpers import requires_corpus, scalelab, write_spec
from tests.unit.launch.test_sweep_expand import base, spec_of  # noqa: F401 (shared with the unit tests)


@requires_corpus
def test_cli_plan_table_and_bad_spec_exit_2(base, work):
    good = write_spec(work, {"name": "g", "base": str(base), "kind": "grid", "axes": {"model": ["n50k", "n100k"]}})
    r = scalelab("sweep", "plan", good)
    assert r.returncode == 0, r.stderr
    assert "n50k" in r.stdout and "FLOPs" in r.stdout and "2 runs (grid)" in r.stdout
    r = scalelab("sweep", "plan", good, "--format", "json")
    assert r.returncode == 0 and '"flops"' in r.stdout
    bad = write_spec(work, {"name": "b", "base": str(base), "kind": "grid", "axes": {"model.d_modl": [8]}})
    r = scalelab("sweep", "plan", bad)
    assert r.returncode == 2 and "model.d_modl: unknown key" in r.stderr


@requires_corpus
def test_slurm_script_dry_run(base, work):
    from launch.executors.slurm import render_check_script, render_script

    spec = spec_of(
        base,
        kind="seeds",
        seeds=[0, 1, 2],
        runs_dir=str(work / "runs"),
        executor={
            "slurm": {
                "partition": "gpu",
                "account": "proj",
                "qos": "high",
                "nodes": 1,
                "gpus_per_node": 8,
                "cpus_per_task": 64,
                "mem": "500G",
                "time": "04:00:00",
                "signal_secs": 300,
                "max_parallel": 2,
                "extra": ["--constraint=h100"],
                "setup": ["module load cuda"],
            }
        },
    )
    text = render_script(spec, [work / f"r{i}" for i in range(3)], work / "m.txt")
    for needle in [
        "#SBATCH --array=0-2%2",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=proj",
        "#SBATCH --qos=high",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --cpus-per-task=64",
        "#SBATCH --mem=500G",
        "#SBATCH --time=04:00:00",
        "#SBATCH --signal=B:USR1@300",
        "#SBATCH --requeue",
        "#SBATCH --constraint=h100",
        "module load cuda",
        "--mode local",
        "--gpus 8",
        "exec ",
    ]:
        assert needle in text, needle
    multi = spec_of(base, kind="seeds", seeds=[0], executor={"slurm": {"nodes": 4, "gpus_per_node": 8}})
    text = render_script(multi, [work / "r0"], work / "m.txt")
    assert "--mode srun" in text and "#SBATCH --nodes=4" in text and "#SBATCH --ntasks-per-node=8" in text
    check = render_check_script(multi)  # the node check runs on each node of a run's allocation
    assert "#SBATCH --nodes=4" in check and "exec srun --nodes=4 --ntasks=4 --ntasks-per-node=1 " in check
    ds = spec_of(
        base, kind="seeds", seeds=[0], executor={"slurm": {"nodes": 2, "gpus_per_node": 8, "launcher": "deepspeed"}}
    )
    assert "--mode deepspeed" in render_script(ds, [work / "r0"], work / "m.txt")
    # The CLI dry run prints the script and submits nothing.
    path = write_spec(
        work,
        {
            "name": "d",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0, 1],
            "runs_dir": str(work / "dr"),
            "executor": {"slurm": {"partition": "p"}},
        },
    )
    r = scalelab("sweep", "launch", path, "--executor", "slurm", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "#SBATCH --array=0-1" in r.stdout and "#SBATCH --partition=p" in r.stdout
    assert not (work / "dr").exists()


@requires_corpus
def test_deepspeed_multinode_dry_run(base, work):
    hostfile = work / "hostfile"
    hostfile.write_text("gpu-a slots=8\ngpu-b slots=8  # second node\n")
    path = write_spec(
        work,
        {
            "name": "m",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0, 1],
            "set": {"train.global_batch_size": 64},  # micro-batch 4 x 16 slots
            "runs_dir": str(work / "mr"),
        },
    )
    r = scalelab("sweep", "launch", path, "--executor", "deepspeed", "--hostfile", hostfile, "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2 and all(ln.startswith("deepspeed --hostfile") for ln in lines)
    assert "--master_addr gpu-a" in lines[0] and "--module pretrain.cli" in lines[0] and "/mr/s1" in lines[1]
