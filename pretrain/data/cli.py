"""`scalelab data prepare CONFIG [key=value ...] [--out DIR] [--force]`."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pretrain.errors import ConfigError, DataError, TasksFailed


def register(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The `data` command group; returns the `prepare` parser (launch adds the executor options)."""
    data = sub.add_parser("data", help="prepare tokenized data sets")
    data_sub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    data_sub.required = True
    p = data_sub.add_parser(
        "prepare",
        help="tokenize a corpus into memmap shards + meta.json (reused when inputs are unchanged)",
        description="Read the sources of a data config, hold out a validation split by document (or read the given "
        "val_sources), train or load the tokenizer and write token shards. Reuses the output when nothing changed. "
        "A mixture config prepares each of its components.",
    )
    p.add_argument("config", help="data config YAML (e.g. configs/data/default.yaml) or a preset name in configs/data/")
    p.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="overrides such as tokenizer.vocab_size=512 (a leading data. is optional)",
    )
    p.add_argument("--out", metavar="DIR", help="output folder (default: data.out_dir, else data/<name>)")
    p.add_argument("--force", action="store_true", help="rebuild even when the cached output is up to date")
    p.set_defaults(func=cmd_prepare)
    return p


def _config_path(ref: str) -> Path:
    from base.config_files import configs_dir  # deferred: imports pydantic (a fast scalelab --help)

    path = Path(ref)
    if path.exists() or ref.endswith((".yaml", ".yml")):
        return path

    preset = configs_dir() / "data" / f"{ref}.yaml"
    return preset if preset.exists() else path


def cmd_prepare(args: argparse.Namespace) -> int:
    from pretrain.data.load import load_data_config  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from pretrain.data.prepare import prepare  # deferred: imports tokenizers

    # `scalelab data prepare --executor/--tasks` (launch.commands.data) passes the function that runs in tasks
    prepare_fn = getattr(args, "prepare_fn", None) or prepare
    overrides = [o.removeprefix("data.") for o in args.overrides]
    start = time.perf_counter()
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    try:
        cfg = load_data_config(_config_path(args.config), overrides)
        if cfg.mixture is not None:
            if args.out:
                raise ConfigError("--out: a mixture has no output folder of its own (each component has one)")
            from pretrain.data.mixture import open_mixture  # deferred: imports numpy, pydantic (a fast --help)

            mix = open_mixture(cfg, prepare_missing=True, log=log, force=args.force, prepare_fn=prepare_fn)
        else:
            if args.out:
                cfg.out_dir = args.out
            prepared = prepare_fn(cfg, log=log, force=args.force)
    except TasksFailed as exc:  # tasks ran and failed: a job failure, not bad input
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (ConfigError, DataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if cfg.mixture is not None:
        print(
            f"mixture '{cfg.name}': {len(mix.components)} components ready in {time.perf_counter() - start:.1f}s, "
            f"one tokenizer (sha256 {mix.meta['tokenizer']['sha256'][:12]})"
        )
        for c in mix.components:
            _summary(c.data, f"{c.label} (weight {c.weight:.3g})")
        return 0
    status = "reused (inputs unchanged)" if prepared.reused else f"built ({prepared.reason})"
    print(f"data '{prepared.meta['name']}': {status} in {time.perf_counter() - start:.1f}s")
    _summary(prepared)
    return 0


def _summary(prepared, title: str | None = None) -> None:
    meta = prepared.meta
    if title:
        print(f"{title}:")
    print(f"  out dir:   {prepared.out_dir}")
    tok = meta["tokenizer"]
    print(
        f"  tokenizer: {tok['kind']}, vocab {prepared.vocab_size}, "
        f"eot {tok['eot_token']!r} = {prepared.eot_id}, {meta['dtype']}"
    )
    for split, info in meta["splits"].items():
        unique = info.get("unique_tokens", info["tokens"])
        dup = f", {unique:,} unique" if unique != info["tokens"] else ""
        print(
            f"  {split + ':':<6}     {info['documents']:>6,} docs {info['tokens']:>12,} tokens "
            f"{info['bytes']:>13,} bytes ({prepared.bytes_per_token(split):.2f} bytes/token{dup})"
        )
    split = meta.get("split", {})
    if split.get("kind") == "given":
        print("  split:     given (data.val_sources)")
    print(f"  fingerprint {prepared.fingerprint[:16]}")
