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

Each branch is checked against its stable run here (`pretrain.init_from.differences`: the same
lr on every step up to N), so a sweep that could not branch exits 2 at `sweep plan`.
"""
from __future__ import annotations

import math

from launch.naming import fmt_num, model_label
from pretrain.errors import ConfigError
from rundir.layout import CHECKPOINTS, checkpoint_tag


def _cooldown(ws, steps: int) -> int:
    return ws.cooldown_steps if ws.cooldown_steps is not None else max(1, int(round(ws.cooldown * steps)))


def wsd_points(spec, b) -> tuple[list, list[str]]:
    """(name parts, overrides, axes) per run: each model's stable run, then its branches."""
    from pretrain.init_from import differences

    ws = spec.wsd
    ckey = "wsd.cooldown_steps" if ws.cooldown_steps is not None else "wsd.cooldown"
    out = []
    for m in ws.models:
        label = model_label(m)
        _, base = b.resolve([("model", m)], label)
        tps = base.tokens_per_step()
        d_max = ws.tokens or base.total_steps() * tps
        t_max = math.ceil(d_max / tps)
        warm = ws.warmup_steps if ws.warmup_steps is not None else (
            base.schedule.warmup_steps if base.schedule.warmup_steps is not None else int(round(base.schedule.warmup_fraction * t_max)))
        c_max = _cooldown(ws, t_max)
        if t_max - c_max < max(1, warm):
            raise ConfigError(f"sweep spec: {ckey}: the stable run of {label} has {t_max} steps; a cooldown of {c_max} steps "
                              f"after a warmup of {warm} leaves no stable steps (shorten the cooldown or warmup, or raise wsd.tokens)")
        branches = []
        for f in ws.fractions:
            if f == 1:
                continue
            exact = f * t_max
            steps = int(round(exact))
            if abs(exact - steps) > 1e-6 or steps < 1:
                raise ConfigError(f"sweep spec: wsd.fractions: {f:g} x {t_max} steps (D_max {d_max:.0f} tokens / {tps} per step) "
                                  f"= {exact:g} is not a whole step; choose fractions (or wsd.tokens) that give whole steps")
            c = _cooldown(ws, steps)
            point = steps - c
            if point < 1:
                raise ConfigError(f"sweep spec: {ckey}: the branch at fraction {f:g} has {steps} steps; a cooldown of {c} steps "
                                  f"leaves no branch point before it (it must start after step 1)")
            if point < warm:
                raise ConfigError(f"sweep spec: {ckey}: the branch at fraction {f:g} ({steps} steps, cooldown {c}) would branch "
                                  f"at step {point}, inside the warmup ({warm} steps: wsd.warmup_steps); raise the fraction "
                                  f"or shorten the cooldown")
            if point > t_max - c_max:
                raise ConfigError(f"sweep spec: {ckey}: the branch at fraction {f:g} would branch at step {point}, after the stable "
                                  f"run's own cooldown starts (step {t_max - c_max}); shorten the cooldown")
            branches.append((f, steps, c, point))
        stable = f"{label}-stable"
        shape = [("model", m), ("train.tokens", None), ("schedule.name", "wsd"), ("schedule.warmup_steps", warm),
                 ("schedule.decay_shape", ws.decay_shape)]
        points = sorted({p for _, _, _, p in branches})
        items = shape + [("train.steps", t_max), ("schedule.decay_steps", c_max), ("train.init_from", None),
                         ("train.checkpoint_at_steps", points)]
        _, stable_cfg = b.resolve(items, stable)
        out.append(([stable], items, {"model": label, "tokens": t_max * tps, "fraction": 1.0, "role": "stable",
                                      "cooldown_steps": c_max, "branch_steps": points, "end_point": True}))
        parent_dir = spec.runs_root() / stable
        for f, steps, c, point in branches:
            name = f"{label}-d{fmt_num(steps * tps)}"
            items = shape + [("train.steps", steps), ("schedule.decay_steps", c), ("train.checkpoint_at_steps", []),
                             ("train.init_from", str(parent_dir / CHECKPOINTS / checkpoint_tag(point)))]
            _, cfg = b.resolve(items, name)
            problems = differences(stable_cfg, cfg, point)
            if problems:
                raise ConfigError(f"sweep spec: run {name} cannot branch from {stable} at step {point}:\n  " + "\n  ".join(problems))
            out.append(([name], items, {"model": label, "tokens": steps * tps, "fraction": f, "role": "branch",
                                        "cooldown_steps": c, "branch_of": stable, "branch_step": point}))
    return out, []
