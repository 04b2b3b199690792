"""The main job's IsoFLOP study from WSD cooldown branches (`isoflop.schedule: wsd`).

The IsoFLOP spec (after the main job's `set` edits) becomes a sweep of kind `wsd` with `budgets`:
the same models, budgets window and compute convention, but per model one stable run to the
largest budget's tokens and a cooldown branch at each smaller budget's, so the prefix each run
shares with the stable run is paid once. The plan's verification run is then trained with the
same recipe: a WSD schedule with the same cooldown fraction and shape.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from pretrain.errors import ConfigError

HEADER = (
    "# Written by `scalelab quickstart` (isoflop.schedule: wsd) from {src}: the IsoFLOP study as WSD cooldown\n"
    "# branches. Plan it with `scalelab sweep plan {path}`.\n"
)


def wsd_spec_from_isoflop(spec_path: Path, overrides: list[str], opts) -> dict:
    """The kind-`wsd` spec (a mapping) equivalent to an IsoFLOP spec; `opts` is the main job's
    `isoflop.wsd` section (cooldown, decay_shape, budgets: null keeps the spec's)."""

    from base.config_files import read_yaml  # deferred: imports pydantic (a fast scalelab --help)
    from launch.sweep.spec import edit_spec, resolve_path  # deferred: imports numpy/pydantic (a fast scalelab --help)

    data = edit_spec(read_yaml(spec_path), list(overrides))
    if data.get("kind") != "isoflop" or not isinstance(data.get("isoflop"), dict):
        raise ConfigError(
            f"isoflop.spec: {spec_path} is not an IsoFLOP spec (kind: "
            "isoflop), so isoflop.schedule: wsd cannot convert it"
        )
    iso = data.pop("isoflop")
    if iso.get("hparams_fit"):
        raise ConfigError(
            "isoflop.schedule: wsd: branches share their stable run's lr and batch, so the IsoFLOP budgets cannot "
            "each take their own from a batch-lr law (set hparams_law: false)"
        )
    if iso.get("anchors"):  # cosine runs of their own, outside the branch design: not converted
        print(
            f"note: isoflop.schedule: wsd leaves out the IsoFLOP spec's {len(iso['anchors'])} anchor run(s): "
            "its points are the branches' ends"
        )
    name = data.get("name") or spec_path.stem
    data.update(name=f"{name}-wsd", kind="wsd", base=str(resolve_path(data["base"], spec_path)))
    data["wsd"] = {
        "models": iso["models"],
        "budgets": list(opts.budgets or iso["budgets"]),
        "tokens_per_param": iso.get("tokens_per_param"),
        "min_steps": iso.get("min_steps", 10),
        "compute": iso.get("compute", "trainer_flops"),
        "cooldown": opts.cooldown,
        "decay_shape": opts.decay_shape,
    }
    return data


def write_wsd_spec(spec_path: Path, overrides: list[str], opts, out_dir: Path) -> Path:
    """Write the converted spec to `out_dir/<name>-wsd.yaml` (rewritten only when it changes, so
    the sweep's runs stay up to date) and check it plans (exit 2 naming the key if not)."""
    from launch.sweep.expand import expand  # deferred: imports torch
    from launch.sweep.spec import parse_spec  # deferred: imports numpy/pydantic (a fast scalelab --help)

    data = wsd_spec_from_isoflop(spec_path, overrides, opts)
    path = out_dir / f"{data['name']}.yaml"
    expand(parse_spec(data, path))
    text = HEADER.format(src=spec_path, path=path) + yaml.safe_dump(data, sort_keys=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def plan_run_schedule(opts) -> list[str]:
    """`scalelab train` overrides that give the plan's run the branches' recipe: WSD, the same
    cooldown fraction and shape, warmup as a fraction of its own steps (as the stable runs)."""
    return [
        "schedule.name=wsd",
        f"schedule.decay_fraction={opts.cooldown}",
        f"schedule.decay_shape={opts.decay_shape}",
        "schedule.decay_steps=null",
        "schedule.warmup_steps=null",
    ]
