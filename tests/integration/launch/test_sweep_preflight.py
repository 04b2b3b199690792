"""Pre-flight at `sweep plan` / `sweep launch`: a run that would fail once queued (batch not
divisible by micro-batch x the executor's world size, a preset that does not resolve when the
trainer reads launch.yaml, a missing data source, W&B online without credentials) exits 2 naming
the run and the keys, and nothing is queued or written. No training here: fast."""

from __future__ import annotations

from launch.commands.preflight import check_presets, wandb_credentials
from launch.sweep.expand import plan
from pretrain.config.loader import resolve_section
from tests.helpers import REPO, requires_corpus, scalelab, write_base, write_spec

BS_LR = REPO / "configs" / "sweeps" / "bs-lr-125m.yaml"


def run(*args, home=None):
    """`scalelab ARGS` with a (fake) W&B key, or with `home` as HOME and no W&B credentials at all."""
    if home is None:
        return scalelab(*args, env={"WANDB_API_KEY": "x" * 40}, timeout=300)
    return scalelab(
        *args, env={"HOME": str(home)}, unset=("WANDB_API_KEY", "NETRC", "WANDB_IDENTITY_TOKEN_FILE"), timeout=300
    )


def test_shipped_bs_lr_125m_plans_cleanly_and_indivisible_batches_exit_2(work):
    r = run("sweep", "plan", BS_LR)
    assert r.returncode == 0, r.stderr
    assert "20 runs (batch_lr)" in r.stdout
    # The spec as first shipped (micro-batch 8 on 2 nodes x 8 GPUs): the five b64 runs cannot run.
    r = run("sweep", "plan", BS_LR, "--set", "set.train.micro_batch_size=8")
    assert r.returncode == 2, r.stdout
    assert "5 of 20 runs would fail" in r.stderr and "nothing was queued" in r.stderr
    assert (
        "train.global_batch_size, train.micro_batch_size: 64 is not a multiple of micro-batch 8 x world size 16 = 128"
        in r.stderr
    )
    assert "gpt-125m-b64-lr6e-4" in r.stderr and "executor.slurm.nodes=2 x gpus_per_node=8" in r.stderr
    # launch checks the executor it is given, before any script is written or job submitted
    r = run(
        "sweep",
        "launch",
        BS_LR,
        "--set",
        "set.train.micro_batch_size=8",
        "--set",
        f"runs_dir={work / 'r'}",
        "--executor",
        "slurm",
        "--dry-run",
    )
    assert r.returncode == 2 and "#SBATCH" not in r.stdout and not (work / "r").exists()


def test_dotted_preset_name_resolves_as_the_trainer_reads_it():
    assert resolve_section("model", "gpt-1.3b")["preset"] == "gpt-1.3b"
    p = plan(REPO / "configs" / "sweeps" / "isoflop-125m-1.3b.yaml")
    big = [r for r in p.runs if r.name.endswith("gpt-1.3b")]
    assert len(big) == 3 and all(r.raw["model"]["preset"] == "gpt-1.3b" for r in big)
    assert [check_presets(r) for r in p.runs] == [None] * len(p.runs)
    r = run("sweep", "plan", REPO / "configs" / "sweeps" / "isoflop-125m-1.3b.yaml")
    assert r.returncode == 0, r.stderr


@requires_corpus
def test_missing_data_source_exits_2_before_anything_is_queued(work):
    base = write_base(work / "base", work / "data")
    text = base.read_text().replace("corpus/tinyshakespeare.txt", "corpus/no-such-book.txt")
    base.write_text(text)
    spec = write_spec(
        work,
        {
            "name": "nodata",
            "base": str(base),
            "kind": "grid",
            "runs_dir": str(work / "runs"),
            "axes": {"optim.lr": [1e-3, 3e-3]},
        },
    )
    for args in (["plan"], ["launch", "--no-progress"]):
        r = run("sweep", *args, spec)
        assert r.returncode == 2, r.stdout + r.stderr
        assert (
            "2 runs (lr1e-3, lr3e-3): data.sources[0].path: data 'tv512': source 'corpus/no-such-book.txt' not found"
            in r.stderr
        )
    assert not (work / "runs").exists() and not (work / "data").exists()


@requires_corpus
def test_wandb_online_needs_credentials(work, monkeypatch):
    base = write_base(work / "base", work / "data")
    spec = write_spec(
        work,
        {
            "name": "online",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0, 1],
            "runs_dir": str(work / "runs"),
            "set": {"wandb.mode": "online"},
        },
    )
    home = work / "home"
    home.mkdir()
    r = run("sweep", "launch", spec, "--no-progress", home=home)
    assert r.returncode == 2 and "2 runs (s0, s1): wandb.mode: online but no W&B credentials" in r.stderr
    assert not (work / "runs").exists()
    r = run("sweep", "plan", spec, home=home)
    assert r.returncode == 2 and "wandb login" in r.stderr
    # offline (or disabled) needs nothing
    assert run("sweep", "plan", spec, "--set", "set.wandb.mode=offline", home=home).returncode == 0
    # a `wandb login` entry in ~/.netrc (or $NETRC) is found the way wandb finds it
    (home / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password " + "k" * 40 + "\n")
    (home / ".netrc").chmod(0o600)
    assert run("sweep", "plan", spec, home=home).returncode == 0
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(home / ".netrc"))
    assert wandb_credentials() == str(home / ".netrc")
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.org")
    assert wandb_credentials() is None  # an entry for another host does not count


@requires_corpus
def test_deepspeed_hostfile_world_size(work):
    base = write_base(work / "base", work / "data")
    hostfile = work / "hostfile"
    hostfile.write_text("a slots=2\nb slots=2\n")
    spec = write_spec(
        work,
        {
            "name": "ds",
            "base": str(base),
            "kind": "seeds",
            "seeds": [0],
            "runs_dir": str(work / "runs"),
            "executor": {"deepspeed": {"hostfile": str(hostfile)}},
        },
    )
    r = run("sweep", "plan", spec)
    assert r.returncode == 2
    assert "4 is not a multiple of micro-batch 4 x world size 4 = 16" in r.stderr
    # local (one process) is fine with the same runs
    assert run("sweep", "plan", spec, "--executor", "local").returncode == 0


def test_launch_preflights_only_the_runs_it_starts(work):
    """A finished run whose corpus was removed since needs no data: the relaunch skips it, exit 0."""
    import json

    base = write_base(work / "base", work / "data")
    base.write_text(base.read_text().replace("corpus/tinyshakespeare.txt", "corpus/gone.txt"))
    spec = write_spec(
        work, {"name": "fin", "base": str(base), "kind": "seeds", "seeds": [0], "runs_dir": str(work / "runs")}
    )
    [r] = plan(spec).runs
    r.run_dir.mkdir(parents=True)
    (r.run_dir / "summary.json").write_text(
        json.dumps({"status": "done", "steps": r.steps, "extras": {"run_id": r.id}})
    )
    assert run("sweep", "plan", spec).returncode == 2  # plan checks every run
    out = run("sweep", "launch", spec, "--no-progress")
    assert out.returncode == 0 and "1 skipped" in out.stdout, out.stdout + out.stderr
