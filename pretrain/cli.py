"""`scalelab train` (and `python -m pretrain.cli` for the `deepspeed` launcher).

Order matters: everything that can be wrong with the input is checked before any file is
written or any process group is created, and a rerun resumes from the run directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import yaml

from base.cli import ArgumentParser
from pretrain.engine.extensions import ExtensionLockTimeout
from pretrain.errors import ConfigError, DataError
from rundir.accelerators import MEMORY_BYTES
from rundir.checkpoints import has_checkpoint
from rundir.files import atomic_write_text
from rundir.layout import RANKS, RunDir
from rundir.summary import read_summary

# Keys that may change between attempts of one run without changing what it computes: the schema's
# RESUMABLE fields (pretrain.config.roles.resumable_keys; base/roles.py).
# Data keys that only change how the tokenizer is trained: a run may resume across them when the
# prepared tokenizer came out identical (same sha256), since then the token stream is too.
TOKENIZER_SAMPLE_KEYS = {"data.tokenizer.sample_chars", "data.tokenizer.train_max_chars"}


def add_train_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="train config YAML (e.g. configs/train/tiny.yaml)")
    p.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")
    p.add_argument("--run-dir", help="run directory (default runs/<config name>)")
    p.add_argument("--no-progress", action="store_true", help="no console progress lines")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="check the config and the DeepSpeed config, build the model on the meta device and print "
        "parameters, FLOPs per token, the layout and the per-rank memory estimate; runs nothing, prepares "
        "no data, writes nothing",
    )
    p.add_argument(
        "--world-size", type=int, metavar="K", help="with --dry-run: the number of ranks (default: $WORLD_SIZE or 1)"
    )
    p.add_argument(
        "--device",
        choices=DRY_RUN_DEVICES,
        metavar="NAME",
        help="with --dry-run: check the memory estimate against this device ("
        + ", ".join(DRY_RUN_DEVICES)
        + "; cpu: this host's memory; default: cpu for fp32 runs, not checked otherwise)",
    )
    p.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)  # set by the deepspeed launcher


DRY_RUN_DEVICES = (*MEMORY_BYTES, "cpu")  # devices whose memory --dry-run checks against


def register(sub) -> None:
    p = sub.add_parser(
        "train",
        help="train a model (resumes from the run directory)",
        description="Train a GPT/MoE model with DeepSpeed. Exit codes: 0 done, 1 failed, "
        "2 configuration error, 3 stopped by SIGTERM/SIGUSR1 after a checkpoint.",
    )
    add_train_args(p)
    p.set_defaults(func=cmd_train)
    cp = sub.add_parser("config", help="show a resolved config or the config reference")
    cp.add_argument("what", choices=["show", "reference"])
    cp.add_argument("config", nargs="?", help="train config YAML (for show)")
    cp.add_argument("overrides", nargs="*", metavar="key.sub=value")
    cp.set_defaults(func=cmd_config)


def _normalised(cfg: dict) -> dict:
    """Re-validate a stored config so keys added to the schema later read as their defaults."""

    from pydantic import ValidationError  # deferred: imports numpy/pydantic (a fast scalelab --help)

    from pretrain.config.schema import TrainConfig  # deferred: imports numpy/pydantic (a fast scalelab --help)

    try:
        return TrainConfig.model_validate(cfg).model_dump(mode="json")
    except ValidationError:
        return cfg


def config_differences(old: dict, new: dict) -> list[str]:
    """What a resume may not change: every key that differs, but the schema's RESUMABLE ones."""
    from base.roles import covered  # deferred: imports pydantic (a fast scalelab --help)
    from pretrain.config.roles import changed, resumable_keys  # deferred: imports pydantic (a fast --help)

    keep = lambda k: not covered(k, resumable_keys())  # noqa: E731
    return [f"{k}: {a!r} -> {b!r}" for k, a, b in changed(_normalised(old), new, keep)]


def cmd_train(args) -> int:
    if args.dry_run or args.world_size is not None or args.device is not None:
        return _cmd_dry_run(args)
    from pretrain.callbacks.signals import StopBeforeTraining, catch_early  # deferred: imports torch

    catch_early()  # a stop during start-up (torch, DeepSpeed, data) ends it as "stopped", not killed
    try:
        return _train(args)
    except StopBeforeTraining as stop:
        if int(os.environ.get("RANK", "0")) == 0:
            print(
                f"received {stop.signal_name} before training started: stopped, nothing to save; "
                "rerun the same command to start (or resume) the run",
                flush=True,
            )
        return 3
    except (ConfigError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ExtensionLockTimeout as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _cmd_dry_run(args) -> int:
    from pretrain.dry_run import dry_run  # deferred: numpy (a fast --help)

    if not args.dry_run:
        print("error: --world-size and --device are --dry-run options (add --dry-run)", file=sys.stderr)
        return 2
    if args.world_size is not None and args.world_size < 1:
        print(f"error: --world-size must be >= 1 (got {args.world_size})", file=sys.stderr)
        return 2

    try:
        return dry_run(args.config, args.overrides, args.world_size, args.device)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _train(args) -> int:
    from pretrain.config.init_from import check  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from pretrain.config.loader import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        check_trainer_builds,
        load_train_config,
    )
    from pretrain.engine.compiling import check_compile  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from pretrain.engine.distributed import env_world_size  # deferred: imports torch
    from pretrain.engine.ds_config import grad_accum_steps  # deferred: imports numpy/pydantic (a fast scalelab --help)

    cfg = load_train_config(args.config, args.overrides)
    check_trainer_builds(cfg)
    grad_accum_steps(cfg, env_world_size())
    _check_eval(cfg)
    if cfg.train.compile:
        import torch  # deferred: imports torch

        check_compile(cfg, torch.cuda.is_available())
    run_dir = Path(args.run_dir or Path("runs") / cfg.name)
    rd = RunDir(run_dir)
    summary = read_summary(rd.path)
    if summary and summary.get("status") == "done" and rd.config.exists():
        diffs = config_differences(
            yaml.safe_load(rd.config.read_text()), _with_vocab(cfg, summary_vocab(rd)).model_dump(mode="json")
        )
        if not diffs:
            if int(os.environ.get("RANK", "0")) == 0:
                print(f"{run_dir}: already done (final loss {summary.get('final_loss')}); nothing to do")
            return 0
    if cfg.train.init_from:
        if not has_checkpoint(run_dir):  # with checkpoints of its own a branch resumes from them
            check(cfg)

    from pretrain.engine.distributed import setup, teardown  # deferred: imports torch

    dist = setup(cfg.train.threads, cfg.train.deterministic, cfg.train.dist_timeout_s)
    rc = 1
    try:
        rc = _train_in_group(cfg, args, rd, run_dir, dist)
    finally:
        teardown(dist, clean=rc == 0)
    return rc


def _train_in_group(cfg, args, rd, run_dir: Path, dist) -> int:
    from pretrain.engine.distributed import apply_timeout, barrier, rank_map  # deferred: imports torch

    ranks = rank_map(dist)
    prepared = _prepare_data(cfg, dist)
    cfg = _with_vocab(cfg, prepared.vocab_size)
    if rd.config.exists():
        diffs = config_differences(yaml.safe_load(rd.config.read_text()), cfg.model_dump(mode="json"))
        if diffs and _same_tokenizer(rd.path, prepared):
            diffs = [d for d in diffs if d.split(":", 1)[0] not in TOKENIZER_SAMPLE_KEYS]
        if diffs:
            raise ConfigError(
                f"{run_dir} holds a run with a different configuration; use another --run-dir or delete it:\n  "
                + "\n  ".join(diffs)
            )
    if dist.is_main:
        from pretrain.engine.trainer import write_resolved_config  # deferred: imports torch

        run_dir.mkdir(parents=True, exist_ok=True)
        write_resolved_config(cfg, run_dir)
        _copy_tokenizer(prepared, run_dir)
        _write_ranks(run_dir, ranks)
        print(f"run directory: {run_dir}", flush=True)
    barrier(dist)

    from pretrain.engine.trainer import Trainer  # deferred: imports torch

    trainer = Trainer(cfg, run_dir, dist, prepared, progress=not args.no_progress)
    trainer.build()
    apply_timeout(cfg.train.dist_timeout_s)  # the groups DeepSpeed made while building, too
    return trainer.train()


def _write_ranks(run_dir: Path, ranks: list[dict]) -> None:
    """ranks.json: where this attempt's ranks run (rank -> host, address, pid, threads); one line per
    host in the log when there is more than one host."""
    atomic_write_text(run_dir / RANKS, json.dumps({"world_size": len(ranks), "ranks": ranks}, indent=2) + "\n")
    hosts = sorted({r["host"] for r in ranks})
    if len(hosts) > 1:
        for h in hosts:
            on = [r for r in ranks if r["host"] == h]
            print(f"ranks on {h} ({on[0]['addr']}): {', '.join(str(r['rank']) for r in on)}", flush=True)


def _copy_tokenizer(prepared, run_dir: Path) -> None:
    """Make the run directory self-contained for evaluation and export."""

    rd = RunDir(run_dir)
    tmp = rd.tokenizer.with_name(rd.tokenizer.name + ".tmp")  # written whole or not at all: a stop may come any time
    shutil.copyfile(prepared.tokenizer_path, tmp)
    os.replace(tmp, rd.tokenizer)
    meta = {
        "vocab_size": prepared.vocab_size,
        "eot_id": prepared.eot_id,
        "data_dir": str(Path(prepared.out_dir).resolve()),
        "tokenizer": prepared.meta.get("tokenizer"),
        "fingerprint": prepared.meta.get("fingerprint"),
    }
    if prepared.meta.get("mixture"):
        meta["mixture"] = prepared.meta["mixture"]
    atomic_write_text(rd.tokenizer_meta, json.dumps(meta, indent=2) + "\n")


def _same_tokenizer(run_dir: Path, prepared) -> bool:
    """The run directory's tokenizer (from its first attempt) is the prepared data's, byte for byte."""

    try:
        old = json.loads(RunDir(run_dir).tokenizer_meta.read_text())["tokenizer"]["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return old == (prepared.meta.get("tokenizer") or {}).get("sha256")


def summary_vocab(rd) -> int | None:
    try:
        return yaml.safe_load(rd.config.read_text())["model"]["vocab_size"]
    except Exception:
        return None


def _with_vocab(cfg, vocab: int | None):
    if vocab is None:
        return cfg
    if cfg.model.vocab_size is None:
        return cfg.model_copy(update={"model": cfg.model.model_copy(update={"vocab_size": vocab})})
    if cfg.model.vocab_size < vocab:
        raise ConfigError(
            f"invalid configuration:\n  model.vocab_size: {cfg.model.vocab_size} is smaller than the tokenizer's "
            f"vocabulary ({vocab}); remove it to use the tokenizer's size"
        )
    return cfg


def _prepare_data(cfg, dist):
    """Rank 0 prepares (or reuses) the data, the others then open it; a mixture does so per component."""
    from pretrain.data.mixture import open_mixture  # deferred: numpy (a fast --help)
    from pretrain.data.prepare import load_prepared, output_dir, prepare  # deferred: imports tokenizers
    from pretrain.engine.distributed import barrier  # deferred: imports torch

    log = lambda m: print(m, flush=True)  # noqa: E731
    if cfg.data.mixture is not None:
        if dist.is_main:
            prepared = open_mixture(cfg.data, prepare_missing=True, log=log)
        barrier(dist)
        return prepared if dist.is_main else open_mixture(cfg.data, prepare_missing=False)
    if dist.is_main:
        prepared = prepare(cfg.data, log=log)
    barrier(dist)
    if not dist.is_main:
        prepared = load_prepared(output_dir(cfg.data))
    return prepared


def _check_eval(cfg) -> None:
    """The `eval:` section's suite/tasks/data, checked by the registered checkpoint evaluator
    (pretrain/checkpoint/evaluators.py) before any work: a wrong one is a configuration error."""
    from pretrain.checkpoint.evaluators import evaluator  # deferred: imports numpy/pydantic (a fast scalelab --help)

    if getattr(cfg, "eval", None) is None:
        return

    try:
        evaluator().check(cfg.eval)
    except ValueError as exc:
        raise ConfigError(f"eval: {exc}") from None


def cmd_config(args) -> int:

    from pretrain.config.loader import (  # deferred: imports numpy/pydantic (a fast scalelab --help)
        dump_config,
        load_train_config,
    )
    from pretrain.config.reference import (
        reference_markdown,  # deferred: imports numpy/pydantic (a fast scalelab --help)
    )

    try:
        if args.what == "reference":
            print(reference_markdown())
            return 0
        if not args.config:
            raise ConfigError("config show needs a CONFIG file")
        print(dump_config(load_train_config(args.config, args.overrides)), end="")
        return 0
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="python -m pretrain.cli", description="scalelab train (launcher entry point)")
    add_train_args(p)
    return cmd_train(p.parse_args(argv))


def _run_and_exit() -> None:
    """The launcher's entry: main()'s code, or 1 after an error the trainer did not turn into one (a lost
    peer's gloo error), shown as torch shows it. Either way exit_process ends the process: left to the
    interpreter, the exit after such an error runs finalisation, which tears torch and gloo down on a
    rank whose peer is gone (3.4 s on a quarter of a core, and 41 s seen on a loaded CI host, before
    node1's rank of a two-node run ended)."""
    import traceback

    from pretrain.engine.distributed import exit_process

    try:
        rc = main()
    except SystemExit:
        raise  # argparse's usage errors: nothing was set up
    except KeyboardInterrupt:
        rc = 130
    except BaseException:
        rank = os.environ.get("RANK", "0")
        lines = traceback.format_exc().splitlines()
        print("\n".join(f"[rank{rank}]: {line}" for line in lines), file=sys.stderr, flush=True)
        rc = 1
    exit_process(rc)


if __name__ == "__main__":
    _run_and_exit()
