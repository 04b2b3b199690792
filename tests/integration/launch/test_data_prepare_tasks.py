"""`scalelab data prepare --tasks K --executor local|slurm|ray`: the same token streams for 1, 2 and 4
tasks, a task killed mid-way rerun alone, mixtures over K-task preparations, and the progress lines.
Slurm (the one-node cluster of .ci/slurm_up.sh) and Ray (the optional extra) are skipped, with the
reason, when they are not there."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import yaml

from tests.helpers import scalelab
from tests.helpers.cli import start
from tests.helpers.models import tiny_tokenizer

WORDS = "the quick brown fox jumps over a lazy dog alpha beta gamma river mountain city garden".split()


def corpus(root: Path, docs: int = 120, seed: int = 0) -> Path:
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "a.jsonl", "w") as fh:
        for _ in range(docs):
            fh.write(json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60)))}) + "\n")
    with open(root / "b.txt", "w") as fh:
        for _ in range(docs):
            fh.write(" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60))) + "\n<|endoftext|>\n")
    return root


def config(path: Path, root: Path, **kw) -> Path:
    cfg = {
        "name": path.stem,
        "root": str(root),
        "sources": ["a.jsonl", "b.txt"],
        "tokenizer": {"vocab_size": 300},
        "val_fraction": 0.1,
        **kw,
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def splits(out: Path) -> dict:
    meta = json.loads((out / "meta.json").read_text())
    return {s: (v["sha256"], v["tokens"], v["unique_tokens"]) for s, v in meta["splits"].items()}


@pytest.mark.slow  # several task processes per pass
def test_one_two_four_local_tasks_same_streams(tmp_path):
    cfg = config(tmp_path / "c.yaml", corpus(tmp_path / "root"))
    ref = None
    for k in (1, 2, 4):
        r = scalelab("data", "prepare", cfg, "--tasks", k, "--out", tmp_path / f"k{k}", cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        meta = json.loads((tmp_path / f"k{k}" / "meta.json").read_text())
        assert [t["id"] for t in meta["tasks"]] == list(range(k)) and all(t["done"] for t in meta["tasks"])
        if k > 1:
            assert f"pass 2 (encode): {k}/{k} tasks done" in r.stdout and "MB/s, ETA" in r.stdout
        ref = ref or splits(tmp_path / "k1")
        assert splits(tmp_path / f"k{k}") == ref


@pytest.mark.parametrize(
    "args, expected",
    [
        (["--executor", "spark"], "argument --executor: invalid choice: 'spark'"),
        (["--tasks", "0"], "--tasks must be a whole number >= 1, got 0"),
        (["--sbatch-arg=--partition=x"], "--sbatch-arg is for --executor slurm"),
    ],
)
def test_bad_options_exit_2_before_any_work(tmp_path, args, expected):
    cfg = config(tmp_path / "c.yaml", corpus(tmp_path / "root", docs=5))
    r = scalelab("data", "prepare", cfg, *args, "--out", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 2 and expected in r.stderr, r.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / ".out.tasks").exists()


def _task_process(work: Path, phase: str, task: int) -> psutil.Process | None:
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "pretrain.data.tasks" in cmd and str(work) in cmd:
            at = cmd.index(str(work))
            if cmd[at + 1 : at + 3] == [phase, str(task)]:
                return proc
    return None


@pytest.mark.slow  # several task processes per pass
def test_a_task_killed_mid_way_is_rerun_alone(tmp_path):
    root = corpus(tmp_path / "root", docs=6000)  # ~2 MB: a task runs for a second or more
    tok = tmp_path / "tok.json"
    tiny_tokenizer(300).save(str(tok))
    cfg = config(tmp_path / "c.yaml", root, tokenizer={"kind": "hf", "path": str(tok)}, workers=1)
    out, work = tmp_path / "out", tmp_path / ".out.tasks"
    driver = start(["data", "prepare", cfg, "--tasks", "3", "--out", out], cwd=tmp_path)
    killed = None
    t0 = time.time()
    while killed is None and time.time() - t0 < 120 and driver.poll() is None:
        if (work / "task-0001" / "progress.json").is_file():
            proc = _task_process(work, "encode", 1)
            if proc is not None:
                proc.send_signal(signal.SIGKILL)
                killed = proc.pid
        time.sleep(0.02)
    stdout, _ = driver.communicate(timeout=300)
    assert killed, stdout
    assert driver.returncode == 1, stdout
    assert "task 1 exit -9" in stdout and "rerun to run only the failed tasks" in stdout
    assert not (work / "task-0001" / "manifest.json").exists()
    r = scalelab("data", "prepare", cfg, "--tasks", "3", "--out", out, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pass 2 (encode): 1 task(s) to run, 2 done before (kept)" in r.stdout
    one = scalelab("data", "prepare", cfg, "--out", tmp_path / "one", cwd=tmp_path)
    assert one.returncode == 0 and splits(out) == splits(tmp_path / "one")


@pytest.mark.slow  # several task processes per pass
def test_a_mixture_prepares_its_components_in_tasks(tmp_path):
    root = corpus(tmp_path / "root")
    tok = tmp_path / "tok.json"
    tiny_tokenizer(300).save(str(tok))
    hf = {"kind": "hf", "path": str(tok)}
    a = config(tmp_path / "ca.yaml", root, sources=["a.jsonl"], tokenizer=hf, out_dir=str(tmp_path / "A"), tasks=2)
    b = config(tmp_path / "cb.yaml", root, sources=["b.txt"], tokenizer=hf, out_dir=str(tmp_path / "B"), tasks=2)
    mix = tmp_path / "mix.yaml"
    mix.write_text(
        yaml.safe_dump(
            {"name": "mix", "mixture": {"a": {"weight": 1, "data": str(a)}, "b": {"weight": 3, "data": str(b)}}}
        )
    )
    r = scalelab("data", "prepare", mix, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("in 2 task(s)") == 2 and "mixture 'mix': 2 components ready" in r.stdout
    for name, c in (("A", a), ("B", b)):
        assert len(json.loads((tmp_path / name / "meta.json").read_text())["tasks"]) == 2
        one = scalelab("data", "prepare", c, "tasks=1", "--out", tmp_path / f"{name}1", cwd=tmp_path)
        assert one.returncode == 0 and splits(tmp_path / name) == splits(tmp_path / f"{name}1")
    from pretrain.data.load import load_data_config
    from pretrain.data.mixture import open_mixture

    m = open_mixture(load_data_config(mix), prepare_missing=False, log=lambda s: None)
    assert [c.label for c in m.components] == ["a", "b"] and [round(c.weight, 2) for c in m.components] == [0.25, 0.75]


def test_sweep_status_line_reads_the_progress_file(tmp_path):
    from launch.commands.sweep import progress_lines
    from pretrain.data.config import DataConfig

    dcfg = DataConfig.model_validate({"name": "big", "sources": ["x.txt"], "out_dir": str(tmp_path / "big")})
    (tmp_path / ".big.tasks").mkdir()
    progress = {"pass": "encode", "done": 3, "total": 8, "mb": 120.0, "mb_total": 400.0, "mb_s": 5.25}
    progress.update(eta_s=53.3, at=1000.0, finished=False)
    (tmp_path / ".big.tasks" / "progress.json").write_text(json.dumps(progress))
    runs = [SimpleNamespace(cfg=SimpleNamespace(data=dcfg))] * 2
    assert progress_lines(runs, now=1010.0) == [
        "data 'big': pass 2 (encode) 3/8 tasks done, 120.0/400.0 MB, 5.25 MB/s, ETA 53s"
    ]
    assert "last update 10m00s ago" in progress_lines(runs, now=1600.0)[0]


def _slurm_up() -> str | None:
    if shutil.which("sbatch") is None:
        return "Slurm client (sbatch) not installed: run .ci/slurm_up.sh"
    r = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], capture_output=True, text=True)
    if r.returncode != 0 or not any(s.rstrip("*") in ("idle", "mix", "alloc") for s in r.stdout.split()):
        return f"no usable Slurm node (sinfo: {r.stdout.strip() or r.stderr.strip()}): run .ci/slurm_up.sh"
    return None


@pytest.mark.slow
def test_slurm_array_tasks_give_the_same_streams(tmp_path):
    from tests.helpers.ci_gate import unavailable

    if (why := _slurm_up()) is not None:
        unavailable("slurm", why)
    cfg = config(tmp_path / "c.yaml", corpus(tmp_path / "root"))
    one = scalelab("data", "prepare", cfg, "--out", tmp_path / "one", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    for k in (2, 4):
        r = scalelab("data", "prepare", cfg, "--executor", "slurm", "--tasks", k, "--out", tmp_path / f"s{k}",
                     cwd=tmp_path, process=True)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        assert "slurm: submitted job array" in r.stdout and f"{k}/{k} tasks done" in r.stdout
        assert splits(tmp_path / f"s{k}") == splits(tmp_path / "one")


@pytest.mark.slow
def test_ray_tasks_give_the_same_streams(tmp_path):
    pytest.importorskip("ray", reason="ray is an optional extra (pip install 'scalelab[ray]')")
    cfg = config(tmp_path / "c.yaml", corpus(tmp_path / "root"))
    one = scalelab("data", "prepare", cfg, "--out", tmp_path / "one", cwd=tmp_path)
    r = scalelab("data", "prepare", cfg, "--executor", "ray", "--tasks", 2, "--out", tmp_path / "r2", cwd=tmp_path,
                 process=True)  # fmt: skip
    assert one.returncode == 0 and r.returncode == 0, r.stdout + r.stderr
    assert "ray: 2 task(s)" in r.stdout and splits(tmp_path / "r2") == splits(tmp_path / "one")
