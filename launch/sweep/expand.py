"""Spec -> runs. Deterministic: the same spec always gives the same runs, names and ids.

Every expanded run is validated through `validate_train`, so an unknown key or an impossible
value fails at plan time with the trainer's own message, prefixed by the run's name.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launch.sweep.expand_moe import moe_points
from launch.sweep.expand_wsd import wsd_points
from launch.sweep.naming import axis_label, config_id, fmt_num, fmt_sci, model_label, sanitize
from launch.sweep.resolve import ConfigBuilder, flops_per_token, vocab_for
from launch.sweep.spec import SweepSpec, load_spec
from launch.sweep.status import current_identity
from models.accounting import model_counts
from pretrain.errors import ConfigError
from scaling.core.conventions import conventions_of
from scaling.core.errors import InputError
from scaling.fits.record import FitRecord, has_exponents

STARTUP_S = 15.0  # process start, DeepSpeed import and data mapping per run (measured on CPU)


@dataclass
class PlannedRun:
    name: str
    id: str
    raw: dict  # the config a worker hands to `scalelab train`
    axes: dict
    cfg: Any  # pretrain.config.schema.TrainConfig
    params: int
    non_embedding_params: int
    flops_per_token: float
    steps: int
    tokens: int
    batch_tokens: int
    lr: float
    flops: float
    est_s: float
    run_dir: Path = field(default=Path("."))
    # Branches (kind wsd): (parent run name, step) whose checkpoint this run starts from, and the
    # FLOPs of the parent's prefix that `flops` includes but this run does not compute.
    after: tuple[str, int] | None = None
    shared_flops: float = 0.0


@dataclass
class SweepExpansion:
    """A sweep spec expanded into its named runs (`scalelab sweep plan` prints it; not the planner's `plan`)."""

    spec: SweepSpec
    runs: list[PlannedRun]
    skipped: list[str]  # human-readable notes (e.g. isoflop pairs below min_steps)

    @property
    def root(self) -> Path:
        return self.spec.runs_root()

    def by_name(self) -> dict[str, PlannedRun]:
        return {r.name: r for r in self.runs}


def expand(spec: SweepSpec) -> SweepExpansion:
    b = ConfigBuilder(spec)
    points, skipped = _points(spec, b)
    if spec.axes and spec.kind not in ("grid", "zip"):
        points = _cross(spec, points)
    if spec.seeds is not None and spec.kind != "seeds":
        if not spec.seeds:
            raise ConfigError("sweep spec: seeds: empty axis")
        points = [
            (parts + [f"s{s}"], items + [("train.seed", s)], {**axes, "seed": s})
            for parts, items, axes in points
            for s in spec.seeds
        ]
    runs: list[PlannedRun] = []
    seen: dict[str, str] = {}
    for parts, items, axes in points:
        name = sanitize("-".join(p for p in parts if p)) or spec.name
        raw, cfg = b.resolve(items, name)
        run = _finish(spec, name, raw, cfg, axes)
        if name in seen:
            raise ConfigError(f"sweep spec: two runs would both be named '{name}' (duplicate axis values?)")
        seen[name] = run.id
        runs.append(run)
    if not runs:
        raise ConfigError("sweep spec expands to no runs")
    return SweepExpansion(spec, runs, skipped)


def _cross(spec: SweepSpec, points: list) -> list:
    """IsoFLOP, batch/LR, seeds and MoE sweeps crossed with grid `axes` (e.g. optim.name: [adamw,
    muon]): every point once per combination, the axes' labels first in its name."""
    keys = list(spec.axes)
    for k, vals in spec.axes.items():
        if not isinstance(vals, list) or not vals:
            raise ConfigError(f"sweep spec: axes.{k}: empty axis (give at least one value)")
    out = []
    for combo in itertools.product(*(spec.axes[k] for k in keys)):
        items = list(zip(keys, combo))
        labels = [axis_label(k, v) for k, v in items]
        extra = {k: v for k, v in items}
        out += [(labels + parts, items + its, {**axes, **extra}) for parts, its, axes in points]
    return out


def _points(spec: SweepSpec, b: ConfigBuilder) -> tuple[list, list[str]]:
    """(name parts, overrides, axes) per run, before seeds."""
    if spec.kind in ("grid", "zip"):
        keys = list(spec.axes)
        for k, vals in spec.axes.items():
            if not isinstance(vals, list) or not vals:
                raise ConfigError(f"sweep spec: axes.{k}: empty axis (give at least one value)")
        if spec.kind == "grid":
            combos = list(itertools.product(*(spec.axes[k] for k in keys)))
        else:
            lengths = {k: len(v) for k, v in spec.axes.items()}
            if len(set(lengths.values())) != 1:
                raise ConfigError(f"sweep spec: zip axes must have equal lengths, got {lengths}")
            combos = list(zip(*(spec.axes[k] for k in keys)))
        out = []
        for combo in combos:
            items = list(zip(keys, combo))
            # every axis names the run, one-value axes too: a second value added later renames nothing
            parts = [axis_label(k, v) for k, v in items]
            axes = {k: (model_label(v) if k == "model" else v) for k, v in items}
            out.append((parts, items, axes))
        return out, []
    if spec.kind == "seeds":
        if not spec.seeds:
            raise ConfigError("sweep spec: seeds: empty axis")
        return [([f"s{s}"], [("train.seed", s)], {"seed": s}) for s in spec.seeds], []
    if spec.kind == "isoflop":
        return _isoflop(spec, b)
    if spec.kind == "moe":
        return moe_points(spec, b)
    if spec.kind == "wsd":
        return wsd_points(spec, b)
    return _batch_lr(spec, b), []


def _isoflop(spec: SweepSpec, b: ConfigBuilder):
    iso = spec.isoflop
    assert iso is not None  # the spec's validator: kind isoflop has an isoflop section
    for what, vals in (("budgets", iso.budgets), ("models", iso.models)):
        if not vals:
            raise ConfigError(f"sweep spec: isoflop.{what}: empty axis")
    for c in iso.budgets:
        if not c > 0:
            raise ConfigError(f"sweep spec: isoflop.budgets: {c} must be > 0")
    hparams = _hparams_law(iso)
    models = []
    for m in iso.models:
        label = model_label(m)
        _, cfg = b.resolve([("model", m)], label)
        counts = model_counts(cfg.model, vocab_for(cfg))
        fpt = flops_per_token(counts, iso.compute)
        models.append((m, label, fpt, cfg, counts.total))
    out, skipped = [], []
    for c in sorted(iso.budgets):
        kept = 0
        for m, label, fpt, cfg, n_total in models:
            hp_items, hp_axes = _budget_hparams(hparams, c, cfg) if hparams else ([], {})
            tps = dict(hp_items).get("train.global_batch_size", cfg.train.global_batch_size) * cfg.model.seq_len
            tokens = c / fpt
            steps = math.ceil(tokens / tps)
            if steps < iso.min_steps:
                skipped.append(f"c{fmt_sci(c)}-{label}: {steps} steps < isoflop.min_steps={iso.min_steps}")
                continue
            if iso.tokens_per_param and not iso.tokens_per_param[0] <= tokens / n_total <= iso.tokens_per_param[1]:
                skipped.append(
                    f"c{fmt_sci(c)}-{label}: {tokens / n_total:.3g} tokens per "
                    f"parameter outside isoflop.tokens_per_param={iso.tokens_per_param}"
                )
                continue
            kept += 1
            items = [("model", m), ("train.steps", None), ("train.tokens", int(round(tokens))), *hp_items]
            out.append(
                ([f"c{fmt_sci(c)}", label], items, {"budget": c, "model": label, "compute": iso.compute, **hp_axes})
            )
        if not kept and iso.tokens_per_param:
            raise ConfigError(
                f"sweep spec: no model has tokens per parameter within isoflop.tokens_per_param={iso.tokens_per_param} "
                f"at budget {fmt_sci(c)} FLOPs; add models or widen the window"
            )
        if not kept:
            smallest = min(models, key=lambda t: t[2])
            tps = smallest[3].tokens_per_step()
            need = iso.min_steps * tps * smallest[2]
            raise ConfigError(
                f"sweep spec: isoflop budget {fmt_sci(c)} FLOPs is too small for the smallest model {smallest[1]} "
                f"({iso.min_steps} steps of {tps} tokens need >= {fmt_sci(need)} FLOPs; raise the budget "
                f"or lower isoflop.min_steps)"
            )
    # anchors first: the longest runs start first, so two workers finish together
    return _anchors(iso, b, hparams) + out, skipped


def _anchors(iso, b: ConfigBuilder, hparams) -> list:
    """isoflop.anchors: one run per (model, tokens), named `anchor-<model>-d<tokens>`, with no `budget`
    in its axes (approach 2 leaves it out; approach 3 fits it with the profiles)."""

    out = []
    for a in iso.anchors:
        label = model_label(a.model)
        _, cfg = b.resolve([("model", a.model)], label)
        c = model_counts(cfg.model, vocab_for(cfg))
        fpt = flops_per_token(c, iso.compute)
        hp_items, hp_axes = _budget_hparams(hparams, fpt * a.tokens, cfg) if hparams else ([], {})
        tps = dict(hp_items).get("train.global_batch_size", cfg.train.global_batch_size) * cfg.model.seq_len
        steps = math.ceil(a.tokens / tps)
        if steps < iso.min_steps:
            raise ConfigError(
                f"sweep spec: isoflop.anchors: {label} at {a.tokens:.4g} tokens is {steps} steps "
                f"< isoflop.min_steps={iso.min_steps}; raise its tokens"
            )
        items = [("model", a.model), ("train.steps", None), ("train.tokens", int(round(a.tokens))), *hp_items]
        out.append(
            (
                ["anchor", label, f"d{fmt_num(a.tokens)}"],
                items,
                {"model": label, "compute": iso.compute, "anchor": True, **hp_axes},
            )
        )
    return out


def _hparams_law(iso):
    """The batch-lr law an IsoFLOP sweep takes its per-budget lr and batch from, checked at plan time."""
    if not iso.hparams_fit:
        return None

    try:
        rec = FitRecord.load(iso.hparams_fit)
    except InputError as exc:
        raise ConfigError(f"sweep spec: isoflop.hparams_fit: {exc}") from None
    if rec["law"] != "batch-lr" or (rec.get("settings") or {}).get("form") != "compute":
        raise ConfigError(
            f"sweep spec: isoflop.hparams_fit {iso.hparams_fit} is a "
            f"{rec['law']} record; it must be a batch-lr fit in the compute form"
        )

    if not has_exponents(rec):
        raise ConfigError(
            f"sweep spec: isoflop.hparams_fit {iso.hparams_fit} holds no law "
            f"({rec['settings'].get('exponents')}): sweep three or more budgets, or leave isoflop.hparams_fit out"
        )
    conv = conventions_of(rec)["compute"]
    if conv != iso.compute:
        raise ConfigError(
            f"sweep spec: isoflop.hparams_fit counts compute as {conv} but isoflop.compute is {iso.compute}: "
            "refit the batch-lr law with --compute-kind " + iso.compute
        )
    return rec.law()


def _budget_hparams(law, budget: float, cfg) -> tuple[list, dict]:
    """lr and global batch (whole sequences, a multiple of the micro-batch) from the law at `budget`."""
    lr, bt = (float(v) for v in law.predict(C=budget))
    gbs = max(1, int(round(bt / cfg.model.seq_len)))
    micro = max(d for d in range(1, min(cfg.train.micro_batch_size, gbs) + 1) if gbs % d == 0)
    lr = float(f"{lr:.3g}")
    return (
        [("optim.lr", lr), ("train.global_batch_size", gbs), ("train.micro_batch_size", micro)],
        {"lr": lr, "batch_size": gbs},
    )


def _batch_lr(spec: SweepSpec, b: ConfigBuilder):
    bl = spec.batch_lr
    assert bl is not None  # the spec's validator: kind batch_lr has a batch_lr section
    models = bl.models if bl.models else [None]
    out = []
    for m in models:
        label = model_label(m) if m is not None else ""
        centre = bl.per_model.get(label) or bl.centre or {}
        sizes = (
            [float(x) for x in bl.batch_sizes]
            if bl.batch_sizes
            else [_need(centre, "batch_size", label) * f for f in (bl.batch_factors or [1.0])]
        )
        lrs = bl.lrs or [_need(centre, "lr", label) * f for f in (bl.lr_factors or [1.0])]
        batches = [int(round(x)) for x in sizes]
        if not batches or not lrs:
            raise ConfigError("sweep spec: batch_lr: empty axis (batch sizes or lrs)")
        if any(x < 1 for x in batches):
            raise ConfigError(f"sweep spec: batch_lr: batch sizes must be >= 1, got {batches}")
        base_items = [("model", m)] if m is not None else []
        _, cfg = b.resolve(base_items, label or "base")
        micro0 = cfg.train.micro_batch_size
        length: list[tuple[str, Any]] = []
        own = (bl.per_model.get(label) or {}).get("tokens")
        if own:  # a model's own length (study next --law batch-lr: each group at its compute)
            length = [("train.steps", None), ("train.tokens", int(round(own)))]
        elif bl.tokens_per_param:
            n = model_counts(cfg.model, vocab_for(cfg)).non_embedding
            length = [("train.steps", None), ("train.tokens", int(round(bl.tokens_per_param * n)))]
        elif bl.tokens:
            length = [("train.steps", None), ("train.tokens", int(bl.tokens))]
        for bs in batches:
            micro = max(d for d in range(1, min(micro0, bs) + 1) if bs % d == 0)
            for lr in lrs:
                lr = float(f"{lr:.6g}")
                items = (
                    base_items
                    + length
                    + [("train.global_batch_size", bs), ("train.micro_batch_size", micro), ("optim.lr", lr)]
                )
                parts = [label, f"b{bs}", f"lr{fmt_num(lr)}"]
                out.append((parts, items, {"model": label or None, "batch_size": bs, "lr": lr}))
    return out


def _need(centre: dict, key: str, label: str) -> float:
    if key not in centre:
        raise ConfigError(
            f"sweep spec: batch_lr needs `{key}s` or `centre.{key}`" + (f" (model {label})" if label else "")
        )
    return centre[key]


def _finish(spec: SweepSpec, name: str, raw: dict, cfg, axes: dict) -> PlannedRun:

    rid = config_id(cfg)
    extras = {**cfg.extras, "sweep": spec.name, "sweep_kind": spec.kind, "run": name, "run_id": rid, "axes": axes}
    wandb = {**raw.get("wandb", {}), "group": spec.name, "name": name}
    raw = {**raw, "name": name, "extras": extras, "wandb": wandb}
    cfg = cfg.model_copy(
        update={
            "name": name,
            "extras": extras,
            "wandb": cfg.wandb.model_copy(update={"group": spec.name, "name": name}),
        }
    )
    c = model_counts(cfg.model, vocab_for(cfg))
    steps, tps = cfg.total_steps(), cfg.tokens_per_step()
    flops = steps * tps * c.flops_per_token
    after = (axes["branch_of"], axes["branch_step"]) if axes.get("role") == "branch" else None
    return PlannedRun(
        name=name,
        id=rid,
        raw=raw,
        axes=axes,
        cfg=cfg,
        params=c.total,
        non_embedding_params=c.non_embedding,
        flops_per_token=c.flops_per_token,
        steps=steps,
        tokens=steps * tps,
        batch_tokens=tps,
        lr=cfg.optim.lr,
        flops=flops,
        est_s=STARTUP_S + (flops - _shared(after, tps, c)) / _throughput(spec),
        run_dir=spec.runs_root() / name,
        after=after,
        shared_flops=_shared(after, tps, c),
    )


def _shared(after, tps: int, c) -> float:
    """FLOPs of a branch's parent prefix (steps 1..N), the same count the trainer writes as shared_flops."""
    return float(after[1] * tps * c.flops_per_token) if after else 0.0


def _throughput(spec: SweepSpec) -> float:
    if spec.flops_per_s:
        return spec.flops_per_s
    s = spec.executor.slurm
    if s.gpus_per_node:  # ~40% MFU of a bf16 H100 per GPU
        return 0.4 * 989e12 * s.gpus_per_node * s.nodes
    return 2e10  # fp32 on a couple of busy CPU cores


def plan(path: str | Path, overrides: list[str] | None = None) -> SweepExpansion:

    p = expand(load_spec(path, overrides))
    adopt_existing(p)
    return p


def load_plan(args):
    """The plan of the sweep the CLI names: `args.spec` with `args.spec_overrides`, cut to `--only` runs if given."""
    p = plan(args.spec, args.spec_overrides)
    if getattr(args, "only", None):
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        names = p.by_name()
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise ConfigError(f"--only: no run named {', '.join(unknown)}; runs: {', '.join(names)}")
        p.runs = [names[n] for n in wanted]
    return p


def adopt_existing(p: SweepExpansion) -> list[tuple[str, str]]:
    """Runs whose directory is missing take over an existing directory of the same run under another name.

    Names once left out one-value grid axes (so giving such an axis a second value renamed every
    run), and ids once counted keys that are bookkeeping now. A run directory named the old way
    holds the same config as a planned run: that run keeps the directory (and its name), so a
    finished run is never trained again and a partial one resumes. Only directories of this
    sweep (`extras.sweep`) that no planned run is named after are read. Returns
    [(planned name, adopted name)]."""

    root = p.root
    missing = [r for r in p.runs if not Path(r.run_dir).exists()]
    if not missing or not root.is_dir():
        return []
    names = {r.name for r in p.runs}
    by_id: dict[str, Path] = {}
    for d in sorted(root.iterdir()):
        if d.name in names or d.name.startswith(".") or not d.is_dir():
            continue
        sweep, rid = current_identity(d)
        if rid and sweep == p.spec.name:
            by_id.setdefault(rid, d)
    adopted = []
    for r in missing:
        found = by_id.pop(r.id) if r.id in by_id else None
        if found is not None:
            adopted.append((r.name, found.name))
            _rename(r, found.name, found)
    return adopted


def _rename(run: PlannedRun, name: str, run_dir: Path) -> None:
    extras = {**run.raw["extras"], "run": name}
    run.raw = {**run.raw, "name": name, "extras": extras, "wandb": {**run.raw["wandb"], "name": name}}
    run.cfg = run.cfg.model_copy(
        update={"name": name, "extras": extras, "wandb": run.cfg.wandb.model_copy(update={"name": name})}
    )
    run.name, run.run_dir = name, run_dir
