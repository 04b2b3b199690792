"""Sweep kind `wsd`: per model one stable run to D_max and cooldown branches from it.

Hägele et al. 2024: a warmup-stable-decay run branched at several token counts, each branch a
short cooldown, gives the (N, D, loss) points of separate runs for the compute of one run (plus
the cooldowns). Per model:

- the stable run `<model>-stable`: schedule wsd (warmup, constant peak lr) to T_max steps
  (D_max tokens), checkpointed at every branch point (`train.checkpoint_at_steps`), with its own
  cooldown over its last steps, so its end is the D_max point (fraction 1);
- a branch `<model>-d<D>` per fraction f < 1: T = f T_max steps (whole, else exit 2), cooldown c
  (`cooldown` x T rounded, or `cooldown_steps`), branch point N = T - c, config = the stable
  run's with `train.init_from: <stable>/checkpoints/step_N`, `train.steps: T` and
  `schedule.decay_steps: c`. Its steps 1..N are the stable run's (shared, counted once).

Every run's end is cooled down, so each is one (N, D, loss) point (`axes.end_point`: true; the
stable run is the full-length point, so fraction 1 adds no run).

Each branch is checked against its stable run here (`pretrain.config.init_from.differences`: the same
lr on every step up to N), so a sweep that could not branch exits 2 at `sweep plan`.

With `budgets` instead of `fractions` the sweep is an IsoFLOP study from branches: per model, the
runs end at D = C / (FLOPs per token) for each budget C (rounded up to whole steps, the pairs
outside `tokens_per_param` or under `min_steps` skipped, as kind isoflop does), the stable run at
the largest. Each run's axes carry `budget` and `compute`, so Chinchilla approach 2 groups the
branch ends by budget (points at equal compute) and approach 3 takes them all.
"""

from __future__ import annotations

import math

from launch.sweep.naming import fmt_num, fmt_sci, model_label
from launch.sweep.resolve import flops_per_token, vocab_for
from models.accounting import model_counts
from pretrain.config.init_from import differences
from pretrain.errors import ConfigError
from rundir.layout import CHECKPOINTS, checkpoint_tag


def _cooldown(ws, steps: int) -> int:
    return ws.cooldown_steps if ws.cooldown_steps is not None else max(1, int(round(ws.cooldown * steps)))


def _fraction_ends(ws, t_max: int, tps: int, d_max: float) -> list[tuple[int, dict]]:
    """(steps, axes) of each branch at a fraction of D_max (fraction 1 is the stable run)."""
    ends = []
    for f in ws.fractions:
        if f == 1:
            continue
        exact = f * t_max
        steps = int(round(exact))
        if abs(exact - steps) > 1e-6 or steps < 1:
            raise ConfigError(
                f"sweep spec: wsd.fractions: {f:g} x {t_max} steps (D_max {d_max:.0f} tokens / {tps} per step) "
                f"= {exact:g} is not a whole step; choose fractions (or wsd.tokens) that give whole steps"
            )
        ends.append((steps, {"fraction": f}))
    return ends


def _budget_ends(ws, label: str, cfg, tps: int, skipped: list[str]) -> list[tuple[int, dict]]:
    """(steps, axes) of every kept budget of one model, by steps (the same rules as kind isoflop)."""

    c = model_counts(cfg.model, vocab_for(cfg))
    fpt = flops_per_token(c, ws.compute)
    ends: dict[int, dict] = {}
    for budget in ws.budgets:
        tokens = budget / fpt
        steps = math.ceil(tokens / tps)
        tag = f"c{fmt_sci(budget)}-{label}"
        if steps < ws.min_steps:
            skipped.append(f"{tag}: {steps} steps < wsd.min_steps={ws.min_steps}")
        elif ws.tokens_per_param and not ws.tokens_per_param[0] <= tokens / c.total <= ws.tokens_per_param[1]:
            skipped.append(
                f"{tag}: {tokens / c.total:.3g} tokens per parameter outside wsd.tokens_per_param={ws.tokens_per_param}"
            )
        elif steps in ends:
            skipped.append(f"{tag}: {steps} steps, the same run as budget {fmt_sci(ends[steps]['budget'])}")
        else:
            ends[steps] = {"budget": budget, "compute": ws.compute}
    return sorted(ends.items())


def _branch_problem(what: str, steps: int, c: int, point: int, warm: int, stable_cooldown_at: int) -> str | None:
    if point < 1:
        return (
            f"{what} has {steps} steps; a cooldown of {c} steps leaves "
            "no branch point before it (it must start after step 1)"
        )
    if point < warm:
        return (
            f"{what} ({steps} steps, cooldown {c}) would branch at step "
            f"{point}, inside the warmup ({warm} steps: wsd.warmup_steps)"
        )
    if point > stable_cooldown_at:
        return (
            f"{what} would branch at step {point}, after the stable "
            f"run's own cooldown starts (step {stable_cooldown_at})"
        )
    return None


def wsd_points(spec, b) -> tuple[list, list[str]]:
    """(name parts, overrides, axes) per run: each model's stable run, then its branches; and the
    (budget, model) pairs skipped, with why."""

    ws = spec.wsd
    ckey = "wsd.cooldown_steps" if ws.cooldown_steps is not None else "wsd.cooldown"
    out, skipped = [], []
    kept_budgets = set()
    for m in ws.models:
        label = model_label(m)
        _, base = b.resolve([("model", m)], label)
        tps = base.tokens_per_step()
        if ws.budgets is None:
            d_max = ws.tokens or base.total_steps() * tps
            t_max = math.ceil(d_max / tps)
            ends, stable_axes = _fraction_ends(ws, t_max, tps, d_max), {"fraction": 1.0}
        else:
            ends = _budget_ends(ws, label, base, tps, skipped)
            if not ends:
                continue
            (t_max, stable_axes), ends = ends[-1], ends[:-1]
        warm = (
            ws.warmup_steps
            if ws.warmup_steps is not None
            else (
                base.schedule.warmup_steps
                if base.schedule.warmup_steps is not None
                else int(round(base.schedule.warmup_fraction * t_max))
            )
        )
        c_max = _cooldown(ws, t_max)
        if t_max - c_max < max(1, warm):
            raise ConfigError(
                f"sweep spec: {ckey}: the stable run of {label} has {t_max} steps; a cooldown of {c_max} steps "
                f"after a warmup of {warm} leaves no stable steps (shorten the cooldown or warmup, or raise wsd.tokens)"
            )
        branches = []
        for steps, axes in ends:
            c = _cooldown(ws, steps)
            point = steps - c
            what = (
                f"the branch at fraction {axes['fraction']:g}"
                if ws.budgets is None
                else f"the branch at budget {fmt_sci(axes['budget'])}"
            )
            problem = _branch_problem(what, steps, c, point, warm, t_max - c_max)
            if problem and ws.budgets is None:
                raise ConfigError(f"sweep spec: {ckey}: {problem}; raise the fraction or shorten the cooldown")
            if problem:  # an IsoFLOP pair that cannot branch is skipped and listed, like one under min_steps
                skipped.append(f"c{fmt_sci(axes['budget'])}-{label}: {problem}")
                continue
            branches.append((steps, c, point, axes))
        kept_budgets |= {a.get("budget") for _, _, _, a in branches} | {stable_axes.get("budget")}
        stable = f"{label}-stable"
        shape = [
            ("model", m),
            ("train.tokens", None),
            ("schedule.name", "wsd"),
            ("schedule.warmup_steps", warm),
            ("schedule.decay_shape", ws.decay_shape),
        ]
        points = sorted({p for _, _, p, _ in branches})
        items = shape + [
            ("train.steps", t_max),
            ("schedule.decay_steps", c_max),
            ("train.init_from", None),
            ("train.checkpoint_at_steps", points),
        ]
        _, stable_cfg = b.resolve(items, stable)
        out.append(
            (
                [stable],
                items,
                {
                    "model": label,
                    "tokens": t_max * tps,
                    **stable_axes,
                    "role": "stable",
                    "cooldown_steps": c_max,
                    "branch_steps": points,
                    "end_point": True,
                },
            )
        )
        parent_dir = spec.runs_root() / stable
        for steps, c, point, axes in branches:
            name = f"{label}-d{fmt_num(steps * tps)}"
            items = shape + [
                ("train.steps", steps),
                ("schedule.decay_steps", c),
                ("train.checkpoint_at_steps", []),
                ("train.init_from", str(parent_dir / CHECKPOINTS / checkpoint_tag(point))),
            ]
            _, cfg = b.resolve(items, name)
            problems = differences(stable_cfg, cfg, point)
            if problems:
                raise ConfigError(
                    f"sweep spec: run {name} cannot branch from {stable} at step {point}:\n  " + "\n  ".join(problems)
                )
            out.append(
                (
                    [name],
                    items,
                    {
                        "model": label,
                        "tokens": steps * tps,
                        **axes,
                        "role": "branch",
                        "cooldown_steps": c,
                        "branch_of": stable,
                        "branch_step": point,
                    },
                )
            )
    if ws.budgets is not None:
        empty = [c for c in ws.budgets if c not in kept_budgets]
        if empty:
            raise ConfigError(
                f"sweep spec: wsd.budgets: no model gives a run at {', '.join(fmt_sci(c) for c in empty)} FLOPs "
                f"(see the skipped pairs: {'; '.join(skipped) or 'none'}); add models, lower wsd.min_steps or widen "
                "wsd.tokens_per_param"
            )
    return out, skipped
