"""Shared test helpers: the CLI in a subprocess, prepared data, sweep folders, and run directories
built without training (synthetic runs, and tiny models saved as a trainer's checkpoint).

Test modules import the helpers by name (`from conftest import scalelab, write_run`); fixtures
(`tiny_data`, `work`) need no import.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
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
        elif uses(item, "cluster") or "slurm" in item.name:
            group.setdefault(mod, "slurm")
        elif module_scoped(item):
            group.setdefault(mod, mod)
    for item in items:
        mod = item.module.__name__
        if mod in group and (group[mod] != "slurm" or uses(item, "cluster") or "slurm" in item.name):
            item.add_marker(pytest.mark.xdist_group(group[mod]))


def data_root() -> Path | None:
    root = Path(os.environ.get("SCALELAB_DATA_ROOT", REPO.parent / "shared" / "data"))
    return root if (root / "corpus").exists() else None


requires_corpus = pytest.mark.skipif(data_root() is None, reason="bundled corpus not found (set SCALELAB_DATA_ROOT)")


# ------------------------------------------------------------------ the CLI in a subprocess
SCALELAB = [sys.executable, "-m", "launch.cli"]


def _env(env: dict | None, unset=()) -> dict:
    full = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full["PYTHONPATH"] = str(REPO) + os.pathsep + full.get("PYTHONPATH", "")
    for k in unset:
        full.pop(k, None)
    return full


def scalelab(*args, cwd: Path | None = None, env: dict | None = None, unset=(), timeout: int = 600,
             process: bool = False) -> subprocess.CompletedProcess:
    """`scalelab ARGS` to completion in `cwd` (default: the checkout); `env` adds to the environment
    and `unset` names variables to leave out. In this process (tests/cli_inprocess.py) unless
    `process=True` or SCALELAB_TEST_PROCESSES=1: a test that needs its own process says so."""
    argv = [str(a) for a in args]
    if process or os.environ.get("SCALELAB_TEST_PROCESSES") == "1":
        return subprocess.run(SCALELAB + argv, cwd=cwd or REPO, env=_env(env, unset), capture_output=True, text=True,
                              timeout=timeout)
    import cli_inprocess

    return cli_inprocess.run(argv, Path(cwd or REPO), env, unset)


def run_cli(args: list, cwd: Path | None, env: dict | None = None, timeout: int = 600, process: bool = False) -> subprocess.CompletedProcess:
    return scalelab(*args, cwd=cwd, env=env, timeout=timeout, process=process)


def free_port() -> int:
    """A TCP port nobody listens on now: tests run side by side (pytest-xdist, --count)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spawn(cmd: list[str], cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """A command running in its own session (stdout+stderr captured), for tests that kill it."""
    return subprocess.Popen(cmd, cwd=cwd, env=_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def start(args: list, cwd: Path, env: dict | None = None) -> subprocess.Popen:
    """`scalelab ARGS` started in its own session (see `spawn`)."""
    return spawn(SCALELAB + [str(a) for a in args], cwd, env)


def wait_for_step(run: Path, step: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    """Until the run's metrics.jsonl has logged `step` (a torn last line is not read)."""
    from rundir.metrics import last_record

    t0 = time.time()
    while time.time() - t0 < timeout:
        rec = last_record(Path(run) / "metrics.jsonl")
        if rec and rec.get("step", 0) >= step:
            return
        if proc.poll() is not None:
            raise AssertionError(f"run ended early: {proc.stdout.read()[-3000:]}")
        time.sleep(0.02)
    raise AssertionError("timed out waiting for training progress")


def kill_after_step(run: Path, step: int, proc: subprocess.Popen, timeout: float = 400) -> None:
    """SIGKILL the run's whole process group once it has logged `step`."""
    wait_for_step(run, step, proc, timeout)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def children(pid: int) -> list[int]:
    """Pids of the live child processes of `pid` (read from /proc)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


# ------------------------------------------------------------------ prepared data
@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """The default corpus prepared once with a 512-token BPE (shared by every training test)."""
    if data_root() is None:
        pytest.skip("bundled corpus not found (set SCALELAB_DATA_ROOT)")
    from pretrain.config.loader import load_data_config
    from pretrain.data.prepare import prepare

    out = tmp_path_factory.mktemp("data") / "tiny512"
    cfg = load_data_config(REPO / "configs/data/default.yaml", ["tokenizer.vocab_size=512", f"out_dir={out}", "name=tiny512"])
    prepare(cfg, log=lambda m: None)
    return out


def tiny_overrides(data_dir: Path, **extra) -> list[str]:
    """A ~50K-parameter model that takes well under a second per step on one core."""
    base = {
        "model": "n50k",
        "model.seq_len": 64,
        "data.tokenizer.vocab_size": 512,
        "data.name": "tiny512",
        "data.out_dir": str(data_dir),
        "train.tokens": None,
        "train.steps": 24,
        "train.micro_batch_size": 8,
        "train.global_batch_size": 8,
        "train.log_every_steps": 1,
        "train.eval_every_steps": 12,
        "train.eval_tokens": 2048,
        "train.checkpoint_every_steps": 6,
        "train.threads": 1,
        "wandb.mode": "disabled",
    }
    base.update(extra)
    return [f"{k}={'null' if v is None else v}" for k, v in base.items()]


def epoch_csv() -> Path:
    """Epoch AI's extraction of the Chinchilla paper's points (the shared data), or skip."""
    p = Path(os.environ.get("SCALELAB_DATA_ROOT", REPO.parent / "shared" / "data")) / "scaling" / "epoch_chinchilla_svg_extracted.csv"
    if not p.exists():
        pytest.skip(f"Epoch Chinchilla data not found at {p} (set SCALELAB_DATA_ROOT to the shared data folder)")
    return p


# ------------------------------------------------------------------ 2-rank runs, one launch per session
# Test modules register the 2-rank runs they only read; the first test that asks for `two_rank_runs`
# trains every registered run in one `deepspeed --num_gpus 2` launch (tests/two_ranks.py), so the
# launcher's and the ranks' start-up is paid once, not once per run.
TWO_RANK_GROUPS: dict[str, Callable[[Path], list[dict]]] = {}


def two_rank_group(name: str):
    """Register `fn(data_dir) -> [job]` under `name`; a job: {"name", "config", "overrides"} plus
    optional "env", "copy": [src, dst] and "remove": [paths] (run names of the same group; see
    tests/two_ranks.py), done in order."""
    def register(fn):
        TWO_RANK_GROUPS[name] = fn
        return fn
    return register


@pytest.fixture(scope="session")
def two_rank_runs(tiny_data, tmp_path_factory) -> dict[str, dict]:
    """{group: {job name: result}}, each result a CompletedProcess with `.run` (its run directory)."""
    import two_ranks

    root = tmp_path_factory.mktemp("two-ranks")
    jobs, names = [], []
    for group, fn in TWO_RANK_GROUPS.items():
        for job in fn(tiny_data):
            jobs.append({"argv": [job["config"], *job["overrides"], "--run-dir", f"{group}/{job['name']}", "--no-progress"],
                         "env": job.get("env"), "copy": [f"{group}/{p}" for p in job.get("copy", [])],
                         "remove": [f"{group}/{p}" for p in job.get("remove", [])]})
            names.append((group, job["name"]))
    out: dict[str, dict] = {}
    for (group, name), res in zip(names, two_ranks.launch(jobs, root, timeout=1800)):
        res.run = root / group / name
        out.setdefault(group, {})[name] = res
    return out


# ------------------------------------------------------------------ sweep folders
# Sweep tests work in their own temp dirs (`work`) rather than pytest's tmp_path: Slurm jobs outlive
# a test's bookkeeping, and concurrent pytest sessions on a shared machine prune each other's basetemps.
# One tiny prepared data set (vocab 512, TinyShakespeare only) is built once under SHARED and reused
# by every module and session (`prepare` caches by fingerprint).
SHARED = Path(tempfile.gettempdir()) / f"scalelab-sweep-tests-{os.getuid()}"


@pytest.fixture()
def work():
    SHARED.mkdir(parents=True, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="run-", dir=SHARED))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def prepared_data() -> Path:
    from pretrain.config.loader import load_train_config
    from pretrain.data.prepare import prepare

    d = SHARED / "data-tv512"
    base = write_base(SHARED / "data-base", d)
    prepare(load_train_config(base).data, log=lambda m: None)
    return d


def write_base(folder: Path, data: Path, **train) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {
        "model": {"preset": "n50k", "seq_len": 64},
        "data": {"name": "tv512", "sources": ["corpus/tinyshakespeare.txt"],
                 "tokenizer": {"kind": "bpe", "vocab_size": 512}, "out_dir": str(data)},
        "optim": {"lr": 3e-3},
        "schedule": {"name": "cosine", "warmup_steps": 2},
        "train": {"steps": 12, "micro_batch_size": 4, "global_batch_size": 4, "log_every_steps": 2,
                  "eval_every_steps": 0, "eval_tokens": 512, "checkpoint_every_steps": 4, **train},
        "deepspeed": {"zero_stage": 0},
        "wandb": {"mode": "disabled"},
    }
    path = folder / "base.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def write_spec(folder: Path, spec: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


# ------------------------------------------------------------------ reading a run directory
def metrics(run: Path) -> list[dict]:
    """Every record of a run's metrics.jsonl, strictly (a torn line fails the test)."""
    return [json.loads(line) for line in (Path(run) / "metrics.jsonl").read_text().splitlines() if line.strip()]


def metrics_steps(run_dir: Path) -> list[int]:
    return [r["step"] for r in metrics(run_dir)]


def summary(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())


def complete_checkpoint(run_dir: Path, min_step: int = 1) -> int | None:
    """The newest complete checkpoint at or after `min_step` (None: none yet). Waiting for one named
    step races with pruning (keep_checkpoints) when the machine is quiet and steps take milliseconds."""
    steps = [int(p.parent.name[5:]) for p in (Path(run_dir) / "checkpoints").glob("step_*/COMPLETE")]
    steps = [s for s in steps if s >= min_step]
    return max(steps) if steps else None


# ------------------------------------------------------------------ run directories without training
def write_run(path: Path, *, config=None, summary=None, metrics=None, checkpoint: int | None = None) -> Path:
    """A run directory from parts, as the trainer would leave it: `config` (a dict, written as YAML,
    or text), `summary` (a dict or `RunSummary`, or text), `metrics` (records, one JSON line each,
    or text), `checkpoint` (a step: an empty `checkpoints/step_N` marked COMPLETE). Text is written
    as it is, so tests can write torn or malformed files."""
    from rundir.summary import RunSummary

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (path / "config.yaml").write_text(config if isinstance(config, str) else yaml.safe_dump(config))
    if metrics is not None:
        (path / "metrics.jsonl").write_text(metrics if isinstance(metrics, str) else "".join(json.dumps(r) + "\n" for r in metrics))
    if checkpoint is not None:
        (path / "checkpoints" / f"step_{checkpoint}").mkdir(parents=True, exist_ok=True)
        (path / "checkpoints" / f"step_{checkpoint}" / "COMPLETE").write_text("{}")
    if summary is not None:
        if isinstance(summary, RunSummary):
            summary = summary.to_dict()
        (path / "summary.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
    return path


def small_run(root: Path, rid: str, n: int = 3, finished: bool = True) -> Path:
    """A run of `n` logged steps (loss 5.0 falling by 0.1), finished (summary.json) or still training."""
    recs = [{"step": i, "loss": 5.0 - i / 10, "lr": 1e-3} for i in range(n)]
    return write_run(Path(root) / rid, config="model: {preset: n50k, d_model: 32}\noptim: {lr: 0.003}\ntrain: {global_batch_size: 8}\n",
                     metrics=recs, summary={"status": "done", "steps": n, "params": 1000, "final_loss": recs[-1]["loss"]} if finished else None)


# ------------------------------------------------------------------ tiny models saved like a trained run
EOT = "<|endoftext|>"
SAMPLE_TEXT = (
    "The cat sat on the mat. The dogs sit on the mats. A bird sings in the tree while the children play.\n"
    "Who should Derek hug after shocking Richard? These men were walking to the store. That woman has eaten.\n"
    "First Citizen: Before we proceed any further, hear me speak. All: Speak, speak.\n"
)


def tiny_tokenizer(vocab_size: int = 300, text: str | None = None):
    """Byte-level BPE with `<|endoftext|>` as id 0, built like the data pipeline's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([text or SAMPLE_TEXT * 4], trainer=trainer)
    return tok


def tiny_model_config(vocab_size: int, seq_len: int = 32, moe: dict | None = None, **kw):
    from models.config import ModelConfig

    base = dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=vocab_size, seq_len=seq_len,
                rope_theta=500.0, norm_eps=1e-5, init_std=0.2)
    base.update(kw)
    if moe is not None:
        base["moe"] = moe
    return ModelConfig(**base)


def tiny_model(cfg, seed: int = 0):
    """A randomly initialised GPT with non-trivial norms (so parity tests compare real numbers)."""
    import torch

    from models.gpt import GPT

    torch.manual_seed(seed)
    model = GPT(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return model.eval()


def write_run_dir(path: Path, model, tokenizer, step: int = 10, wandb_mode: str = "disabled") -> Path:
    """A self-contained run directory holding `model` as a ZeRO-0 checkpoint at `checkpoints/step_<step>`
    (config.yaml, tokenizer files, COMPLETE marker, `latest`), so evaluation and export can be
    tested without DeepSpeed or training."""
    import torch

    from pretrain.config.loader import load_train_config
    from pretrain.config.schema import TrainConfig

    base = load_train_config(REPO / "configs/train/tiny.yaml", ["train.tokens=1000"])
    data = base.model_dump(mode="json")
    data["model"] = model.cfg.model_dump(mode="json")
    data["wandb"]["mode"] = wandb_mode
    data["train"]["micro_batch_size"] = data["train"]["global_batch_size"] = 2
    path = write_run(path, config=TrainConfig.model_validate(data).model_dump(mode="json"))
    tokenizer.save(str(path / "tokenizer.json"))
    meta = {"vocab_size": tokenizer.get_vocab_size(), "eot_id": tokenizer.token_to_id(EOT)}
    (path / "tokenizer_meta.json").write_text(json.dumps(meta))
    ck = path / "checkpoints" / f"step_{step}"
    ck.mkdir(parents=True, exist_ok=True)
    torch.save({"module": model.state_dict()}, ck / "mp_rank_00_model_states.pt")
    (ck / "COMPLETE").write_text(json.dumps({"step": step}) + "\n")
    (path / "checkpoints" / "latest").write_text(f"step_{step}\n")
    return path


# ------------------------------------------------------------------ a synthetic IsoFLOP run tree
def isoflop_truth():
    """The law the synthetic IsoFLOP tree is drawn from (in non-embedding N)."""
    from scaling.laws import ChinchillaLaw

    return ChinchillaLaw(E=2.0, A=60.0, B=400.0, alpha=0.40, beta=0.33)


def k_trainer(n_ne):
    """The trainer's FLOPs per token for a model of n_ne non-embedding parameters: 6 N plus an
    overhead (head, attention) that dominates tiny models -- deliberately not 6 N."""
    return 6.0 * n_ne * (1.0 + 2.0 * (2e4 / n_ne) ** 0.5)


def write_isoflop_tree(root, budgets=(1e13, 4e13, 1.6e14), sizes=None, compute="trainer_flops", unique=None, noise=0.0, seed=0,
                       anchors=()):
    """Run directories laid out like an IsoFLOP sweep sized in `compute`: equal C per budget, then
    one run per (n, D) of `anchors` without a budget (isoflop.anchors)."""
    import numpy as np

    truth = isoflop_truth()
    rng = np.random.default_rng(seed)
    sizes = sizes or list(np.geomspace(1e4, 1e6, 7))
    i = 0
    points = [(C, n, None) for C in budgets for n in sizes] + [(None, n, D) for n, D in anchors]
    for C, n, D in points:
        total = n + 3e4  # a 30k-parameter embedding: over half of the smallest models
        k = {"trainer_flops": k_trainer(n), "6ND_total": 6 * total, "6ND_nonembed": 6 * n}[compute]
        D = C / k if D is None else D
        loss = float(truth.predict(n, D) * np.exp(noise * rng.standard_normal()))
        axes = {"budget": C, "compute": compute} if C is not None else {"compute": compute, "anchor": True}
        summary = {"status": "done", "params": total, "non_embedding_params": n, "active_params": total, "tokens": D,
                   "flops": k_trainer(n) * D, "flops_per_token": k_trainer(n), "final_val_loss": loss, "steps": 100,
                   "extras": {"axes": axes}}
        if unique:
            summary.update(unique_tokens=unique, epochs=D / unique)
        config = json.dumps({"name": f"r{i:02d}", "model": {"seq_len": 128}, "optim": {"lr": 3e-3, "weight_decay": 0.05},
                             "schedule": {"name": "cosine", "warmup_fraction": 0.07, "min_lr_ratio": 0.1},
                             "train": {"global_batch_size": 8, "micro_batch_size": 8},
                             "data": {"name": "toy", "sources": ["x.txt"], "tokenizer": {"vocab_size": 512}}})
        write_run(Path(root) / "iso" / f"r{i:02d}", summary=summary, config=config)
        i += 1
    return Path(root) / "iso"
