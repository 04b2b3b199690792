"""Pre-flight: every planned run checked against what will run it, before anything is queued.

A sweep whose runs only fail once a Slurm task starts costs a queue wait per run and a
traceback per run. `sweep plan` and `sweep launch` call `preflight` and exit 2 listing every
run that would fail, with the keys to change:

- batch: `train.global_batch_size` must be a multiple of `train.micro_batch_size` x the world
  size of the executor that runs it (local: 1 process, or `gpus_per_run` ranks on GPUs; Slurm:
  from nodes, gpus_per_node and the launcher; deepspeed: the hostfile's slots);
- presets: the run's config, written to launch.yaml and read back the way the trainer reads it,
  resolves every preset and gives the same run (a preset name with a dot once did not);
- data: every file, folder or glob of `data.sources`/`val_sources` (and each mixture
  component) exists, without hashing anything; remote `hf_dataset` sources are not checked;
- repetition: a run's tokens over its data's unique training tokens (launch/sweep/epochs.py: exact when
  prepared, else estimated) above its `train.max_epochs_warn`, unless --allow-repeats;
- W&B: `wandb.mode: online` needs credentials where wandb looks for them: WANDB_API_KEY,
  WANDB_IDENTITY_TOKEN_FILE, or a .netrc entry ($NETRC, ~/.netrc) for the host of
  WANDB_BASE_URL (default api.wandb.ai).
"""

from __future__ import annotations

import json
import netrc
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from launch.executors.deepspeed_multinode import read_hostfile
from launch.executors.local import visible_gpus
from launch.executors.slurm import rank_mode
from launch.sweep.data_jobs import _data_sets, is_local_path
from launch.sweep.epochs import run_epochs
from launch.sweep.mup_check import mup_transfer_warning
from pretrain.config.loader import PRESET_DIRS, resolve_section, validate_train
from pretrain.data.sources import _local_hf_path, _resolve_path_source
from pretrain.errors import ConfigError, DataError

EXECUTORS = ("local", "slurm", "deepspeed")
SHOW = 25  # problems listed before "... and N more"


@dataclass
class Problem:
    run: str
    keys: str  # the config keys (or spec keys) to change
    message: str


# ------------------------------------------------------------------ world size per executor
def world_size(spec, executor: str) -> tuple[int | None, str]:
    """(ranks one run trains on, how that follows from the spec); None when it cannot be known here."""
    if executor == "local":
        n = spec.executor.local.gpus_per_run
        if visible_gpus() and n > 1:
            return n, f"executor.local.gpus_per_run={n}"
        return 1, "one process"
    if executor == "slurm":
        s = spec.executor.slurm
        mode = rank_mode(s)
        per = max(1, s.gpus_per_node)
        if mode == "single":
            return 1, "executor.slurm launcher single: one process"
        if mode == "local":
            return per, f"executor.slurm.gpus_per_node={s.gpus_per_node} on one node"
        return s.nodes * per, f"executor.slurm.nodes={s.nodes} x gpus_per_node={s.gpus_per_node}"
    ds = spec.executor.deepspeed
    if not ds.hostfile:
        return None, "executor.deepspeed.hostfile not set"

    try:
        hosts = read_hostfile(ds.hostfile)
    except OSError as exc:
        raise ConfigError(f"executor.deepspeed.hostfile: cannot read {ds.hostfile}: {exc.strerror}") from None
    if ds.num_nodes:
        hosts = hosts[: ds.num_nodes]
    n = sum(ds.num_gpus or slots for _, slots in hosts)
    return n, f"executor.deepspeed hostfile {ds.hostfile}: {len(hosts)} host(s), {n} slot(s)"


def check_batch(run, world: int, how: str, executor: str) -> Problem | None:
    t = run.cfg.train
    per_step = t.micro_batch_size * world
    if t.global_batch_size % per_step == 0:
        return None
    return Problem(
        run.name,
        "train.global_batch_size, train.micro_batch_size",
        f"{t.global_batch_size} is not a multiple of micro-batch {t.micro_batch_size} x world size {world} "
        f"= {per_step} under executor {executor} ({how})",
    )


# ------------------------------------------------------------------ presets
def check_presets(run, cache: dict | None = None) -> Problem | None:
    """Read the run's preset sections back as the trainer reads launch.yaml: resolved again, same config.

    Checked once per distinct (model, data, deepspeed) sections: a 1,000-run sweep has a few."""

    sections = {k: run.raw[k] for k in PRESET_DIRS if k in run.raw}
    key = json.dumps(sections, sort_keys=True, default=str)
    if cache is not None and key in cache:
        found = cache[key]
        return Problem(run.name, found[0], found[1]) if found else None
    found = None
    back = yaml.safe_load(yaml.safe_dump(sections, sort_keys=False))  # launch.yaml is YAML
    for section, value in back.items():
        try:
            back[section] = resolve_section(section, value)
        except ConfigError as exc:
            found = (f"{section}.preset" if isinstance(value, dict) else section, str(exc))
            break
    if found is None:
        try:
            cfg = validate_train({**run.raw, **back})
        except ConfigError as exc:
            found = ("config", str(exc).replace("\n", " "))
        else:
            diff = [k for k in sections if getattr(cfg, k) != getattr(run.cfg, k)]
            if diff:
                found = (
                    ", ".join(diff),
                    "the trainer would read a different config from launch.yaml than the one planned",
                )
    if cache is not None:
        cache[key] = found
    return Problem(run.name, found[0], found[1]) if found else None


# ------------------------------------------------------------------ data
def _data_problems(dcfg) -> list[str]:

    out = []
    for which in ("sources", "val_sources"):
        for i, src in enumerate(getattr(dcfg, which) or []):
            if src.path is None:
                # a name on the Hub is not checked
                if is_local_path(src.hf_dataset) and _local_hf_path(dcfg, src.hf_dataset) is None:
                    out.append(f"data.{which}[{i}].hf_dataset: local dataset {src.hf_dataset} not found")
                continue
            try:
                _resolve_path_source(dcfg, src)
            except DataError as exc:
                out.append(f"data.{which}[{i}].path: " + str(exc).splitlines()[0])
    tok = dcfg.tokenizer
    if tok.kind == "hf" and tok.path and not Path(tok.path).expanduser().exists():
        out.append(f"data.tokenizer.path: {tok.path} not found")
    return out


def check_data(runs: list) -> list[Problem]:
    """Sources of every data set the runs train on exist (checked once per distinct data config)."""

    seen: dict[str, list[str]] = {}
    problems = []
    for r in runs:
        try:
            sets = _data_sets(r.cfg.data)
        except DataError as exc:
            problems.append(Problem(r.name, "data.mixture", str(exc).splitlines()[0]))
            continue
        for dcfg in sets:
            key = json.dumps(dcfg.model_dump(mode="json"), sort_keys=True)
            if key not in seen:
                seen[key] = _data_problems(dcfg)
            for msg in seen[key]:
                keys, _, text = msg.partition(": ")
                problems.append(Problem(r.name, keys, f"data '{dcfg.name}': {text}"))
    return problems


# ------------------------------------------------------------------ W&B
def wandb_credentials() -> str | None:
    """Where wandb would find an API key (as `wandb.init` looks it up), or None."""
    if os.environ.get("WANDB_API_KEY"):
        return "WANDB_API_KEY"
    token = os.environ.get("WANDB_IDENTITY_TOKEN_FILE")
    if token and Path(token).expanduser().is_file():
        return "WANDB_IDENTITY_TOKEN_FILE"
    host = urlsplit(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").netloc
    if os.environ.get("NETRC"):
        paths = [Path(os.environ["NETRC"]).expanduser()]
    else:
        paths = [Path("~/.netrc").expanduser(), Path("~/_netrc").expanduser()]
    for path in paths:
        try:
            creds = netrc.netrc(str(path)).authenticators(host)
        except (OSError, netrc.NetrcParseError):
            continue
        if creds and creds[2]:
            return str(path)
    return None


def check_wandb(runs: list) -> list[Problem]:
    online = [r for r in runs if r.cfg.wandb.mode == "online"]
    if not online or wandb_credentials():
        return []
    host = urlsplit(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").netloc
    why = (
        f"online but no W&B credentials (WANDB_API_KEY unset and no .netrc entry for {host}); "
        "run `wandb login`, export WANDB_API_KEY, or plan it offline with --set set.wandb.mode=offline"
    )
    return [Problem(r.name, "wandb.mode", why) for r in online]


# ------------------------------------------------------------------ data repetition
def check_epochs(runs: list, allow_repeats: bool) -> list[Problem]:
    """Runs that would pass over their unique training tokens more than their train.max_epochs_warn
    (launch/sweep/epochs.py), unless the user repeats data on purpose (--allow-repeats)."""

    if allow_repeats:
        return []
    out = []
    for r in runs:
        limit = r.cfg.train.max_epochs_warn
        if limit is None:
            continue
        epochs, basis = run_epochs(r)
        if epochs is not None and epochs > limit:
            out.append(
                Problem(
                    r.name,
                    "train.tokens, data",
                    f"{epochs:.3g} epochs over data '{r.cfg.data.name}' "
                    f"({basis.split(' (')[0]}: `sweep plan` shows how), more "
                    f"than train.max_epochs_warn={limit:g}: its loss would measure memorisation; use a larger "
                    "corpus or fewer tokens, or pass --allow-repeats to repeat data on purpose",
                )
            )
    return out


# ------------------------------------------------------------------ all together
def configured_executors(spec) -> list[str]:
    """The executors a spec sets up (its `executor:` keys); local when it names none."""
    given = [e for e in EXECUTORS if e in spec.executor.model_fields_set]
    return given or ["local"]


def preflight(plan, executors: list[str], allow_repeats: bool = False) -> None:
    """Raise ConfigError (exit 2) listing every run that would fail once queued, or repeat its
    data beyond its limit, and why."""
    problems: list[Problem] = []
    for ex in executors:
        world, how = world_size(plan.spec, ex)
        if world is None:
            continue
        problems += [p for r in plan.runs if (p := check_batch(r, world, how, ex))]
    cache: dict = {}
    problems += [p for r in plan.runs if (p := check_presets(r, cache))]
    problems += check_data(plan.runs)
    problems += check_wandb(plan.runs)
    problems += check_epochs(plan.runs, allow_repeats)
    warning = mup_transfer_warning([r.cfg for r in plan.runs])
    if warning:  # not a problem: the runs train, but the lr transfer is beyond what width-μP covers
        print(warning, file=sys.stderr, flush=True)  # stderr: `sweep plan --format json` keeps its stdout
    if not problems:
        return
    runs = {p.run for p in problems}
    grouped: dict[tuple[str, str], list[str]] = {}  # one line per problem, naming every run it hits
    for p in problems:
        grouped.setdefault((p.keys, p.message), []).append(p.run)
    lines = []
    for (keys, message), names in list(grouped.items())[:SHOW]:
        who = f"run {names[0]}" if len(names) == 1 else f"{len(names)} runs ({_names(names)})"
        lines.append(f"  {who}: {keys}: {message}")
    if len(grouped) > SHOW:
        lines.append(f"  ... and {len(grouped) - SHOW} more problems")
    raise ConfigError(
        f"pre-flight: {len(runs)} of {len(plan.runs)} runs would fail once queued; nothing was queued:\n"
        + "\n".join(lines)
    )


def _names(names: list[str], show: int = 6) -> str:
    return ", ".join(names[:show]) + (f", ... {len(names) - show} more" if len(names) > show else "")
