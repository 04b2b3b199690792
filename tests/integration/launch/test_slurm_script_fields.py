"""Slurm string fields are checked when the spec is read and quoted in the script: a newline in a
partition (or account, qos, extra directive, setup line) would otherwise end the `#SBATCH` line
and run the rest as a shell command in the job."""

from __future__ import annotations

import pytest

from tests.helpers import requires_corpus, scalelab, write_base, write_spec


def spec_with(work, slurm: dict):
    base = write_base(work / "base", work / "no-data")
    return write_spec(
        work,
        {
            "name": "q",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0],
            "runs_dir": str(work / "runs"),
            "executor": {"slurm": slurm},
        },
    )


@pytest.mark.parametrize(
    "slurm, key",
    [
        ({"partition": "gpu\ntouch /tmp/owned"}, "executor.slurm.partition"),
        ({"account": "proj; rm -rf ~"}, "executor.slurm.account"),
        ({"qos": "high\r"}, "executor.slurm.qos"),
        ({"mem": "64G\necho x"}, "executor.slurm.mem"),
        ({"time": "04:00:00 && id"}, "executor.slurm.time"),
        ({"extra": ["--constraint=h100\ntouch /tmp/owned"]}, "executor.slurm.extra"),
        ({"extra": ["--comment=it's"]}, "executor.slurm.extra"),
        ({"setup": ["module load cuda\nid"]}, "executor.slurm.setup"),
    ],
)
def test_bad_slurm_strings_exit_2_naming_the_key(work, slurm, key):
    spec = spec_with(work, slurm)
    for cmd in (["sweep", "plan", spec], ["sweep", "launch", spec, "--executor", "slurm", "--dry-run"]):
        r = scalelab(*cmd)
        assert r.returncode == 2, r.stdout + r.stderr
        assert key in r.stderr, r.stderr
        assert "#SBATCH" not in r.stdout


@requires_corpus
def test_directive_values_are_quoted_in_the_script(work):
    spec = spec_with(
        work,
        {
            "partition": "gpu,gpu2",
            "account": "proj-1",
            "time": "1-12:00:00",
            "mem": "64G",
            "extra": ["--comment=two words & more", "constraint=h100|a100", "--exclusive", "-C h100"],
            "max_requeues": 5,
        },
    )
    r = scalelab("sweep", "launch", spec, "--executor", "slurm", "--dry-run")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for needle in [
        "#SBATCH --partition=gpu,gpu2",
        "#SBATCH --account=proj-1",
        "#SBATCH --time=1-12:00:00",
        "#SBATCH --mem=64G",
        "#SBATCH --comment='two words & more'",
        "#SBATCH --constraint='h100|a100'",
        "#SBATCH --exclusive",
        "#SBATCH -C h100",
    ]:
        assert needle in lines, needle
    assert "--requeue --max-requeues 5" in r.stdout
