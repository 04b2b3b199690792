"""Tune once, transfer (`transfer.enabled`): the main job's lr found on its smallest model under μP.

The IsoFLOP spec (after the main job's `set` edits) gives the lr sweep: its smallest model (by
d_model, unless `transfer.model` names one), trained on `transfer.tokens` tokens at each of
`transfer.lrs` under `model.parametrization: mup` with that model's width as `mup_base_width`,
and otherwise the IsoFLOP runs' recipe (sequence length, batch, schedule, data). The chosen lr is
the vertex of a parabola in log lr through the final validation losses (scaling.fits.lr_choice).
Every IsoFLOP run, anchor and the plan's run then trains under mup at that base width and lr:
the IsoFLOP spec is rewritten with those keys in its `set`, so the runs, their fits and the plan's
recipe all carry them.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pretrain.errors import ConfigError
from rundir.read import find_run_dirs
from rundir.summary import read_summary

HEADER = (
    "# Written by `scalelab quickstart` (transfer.enabled) from {src}: {what}.\n"
    "# Plan it with `scalelab sweep plan {path}`.\n"
)


def _isoflop_data(spec_path: Path, overrides: list[str]) -> dict:

    from base.config_files import read_yaml  # deferred: imports pydantic (a fast scalelab --help)
    from launch.sweep.spec import edit_spec, resolve_path  # deferred: imports numpy/pydantic (a fast scalelab --help)

    data = edit_spec(read_yaml(spec_path), list(overrides))
    if data.get("kind") != "isoflop" or not isinstance(data.get("isoflop"), dict):
        raise ConfigError(
            f"isoflop.spec: {spec_path} is not an IsoFLOP spec (kind: isoflop): transfer needs its models"
        )
    data["base"] = str(resolve_path(data["base"], spec_path))
    return data


def _shapes(data: dict, spec_path: Path, models: list) -> list[tuple[int, int, int, object]]:
    """(d_model, n_layers, n_heads, model) of each model as the spec's runs would resolve it."""
    from launch.sweep.resolve import ConfigBuilder  # deferred: imports numpy/pydantic (a fast scalelab --help)
    from launch.sweep.spec import parse_spec  # deferred: imports numpy/pydantic (a fast scalelab --help)

    b = ConfigBuilder(parse_spec(data, spec_path))
    out = []
    for m in models:
        _, cfg = b.resolve([("model", m)], str(m))
        out.append((cfg.model.d_model, cfg.model.n_layers, cfg.model.n_heads, m))
    return out


def lr_spec(spec_path: Path, overrides: list[str], opts) -> tuple[dict, str, dict]:
    """(the lr sweep's spec as a mapping, its model, its μP keys) from the IsoFLOP spec and the main
    job's `transfer` section. The μP keys are the base shapes every later run shares: the base width
    (the sweep model's d_model unless transfer.base_width) and the base head dim the sweep model has
    under it, so the attention scale of every run is relative to the model the lr was tuned on."""
    from launch.sweep.spec import edit_spec  # deferred: imports numpy/pydantic (a fast scalelab --help)

    data = _isoflop_data(spec_path, overrides)
    if opts.model:
        (width, _, heads, model), *_ = _shapes(data, spec_path, [opts.model])
    else:  # the smallest by width, then by depth
        width, _, heads, model = min(_shapes(data, spec_path, data["isoflop"]["models"]), key=lambda t: t[:2])
    if not isinstance(model, str):
        raise ConfigError("transfer.model: the IsoFLOP spec's smallest model is not a preset; name one")
    base = opts.base_width or width
    mup = {
        "model.parametrization": opts.parametrization,
        "model.mup_base_width": base,
        "model.mup_base_head_dim": max(1, base // heads),
    }
    data.pop("isoflop")
    settings = {k: v for k, v in (data.get("set") or {}).items() if k != "optim.lr"}
    settings.update({"train.steps": None, "train.tokens": int(round(opts.tokens)), **mup})
    data.update(
        name=f"{data['name']}-{opts.parametrization}-lr",
        kind="grid",
        set=settings,
        axes={"model": [model], "optim.lr": list(opts.lrs)},
    )
    return edit_spec(data, list(opts.set)), model, mup


def transferred_settings(mup: dict, lr: float) -> dict:
    """The train-config keys every later run takes (lr to 4 significant digits: a stable run id)."""
    return {**mup, "optim.lr": float(f"{lr:.4g}")}


def isoflop_spec(spec_path: Path, overrides: list[str], settings: dict, wsd=None) -> dict:
    """The IsoFLOP spec (or, with `wsd` options, its WSD-branch conversion) with the transferred
    keys in its `set`, named `<name>-mup`."""
    from launch.quickstart.wsd import wsd_spec_from_isoflop  # deferred: imports numpy/pydantic

    data = wsd_spec_from_isoflop(spec_path, overrides, wsd) if wsd is not None else _isoflop_data(spec_path, overrides)
    data["set"] = {**(data.get("set") or {}), **settings}
    data["name"] = f"{data['name']}-{settings['model.parametrization']}"
    return data


def write_spec(data: dict, out_dir: Path, src: Path, what: str) -> Path:
    """Write a generated spec to `out_dir/<name>.yaml` (rewritten only when it changes, so its runs
    stay up to date) after checking that it plans (exit 2 naming the key if not)."""
    from launch.sweep.expand import expand  # deferred: imports torch
    from launch.sweep.spec import parse_spec  # deferred: imports numpy/pydantic (a fast scalelab --help)

    path = out_dir / f"{data['name']}.yaml"
    expand(parse_spec(data, path))
    text = HEADER.format(src=src, what=what, path=path) + yaml.safe_dump(data, sort_keys=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def planned_configs(path: Path, overrides: list[str] = ()) -> list:
    """The validated train configs of a spec's runs (for the μP depth/batch check across sweeps)."""
    from base.config_files import read_yaml  # deferred: imports pydantic (a fast scalelab --help)
    from launch.sweep.expand import expand  # deferred: imports torch
    from launch.sweep.spec import edit_spec, parse_spec  # deferred: imports numpy/pydantic (a fast scalelab --help)

    return [r.cfg for r in expand(parse_spec(edit_spec(read_yaml(path), list(overrides)), path)).runs]


def choose(runs_root: Path, lrs: list[float], model: str, mup: dict) -> dict:
    """The lr sweep's finished runs at the grid's lrs (a run at another lr, from an earlier grid, is
    not counted), their final validation losses and the chosen lr (scaling.fits.lr_choice)."""
    from scaling.fits.lr_choice import choose_lr  # deferred: imports numpy (a fast scalelab --help)

    rows = []
    for d in find_run_dirs(runs_root):
        s = read_summary(d) or {}
        lr = s.get("lr")
        if lr is None or not any(abs(lr - x) <= 1e-9 * x for x in lrs):
            continue
        loss = s.get("final_val_loss") if s.get("final_val_loss") is not None else s.get("final_loss")
        rows.append({"run": d.name, "lr": float(lr), "status": s.get("status"), "val_loss": loss})
    rows.sort(key=lambda r: r["lr"])
    done = [r for r in rows if r["status"] == "done"]
    if not done:
        raise ConfigError(f"transfer: no run of the lr sweep finished under {runs_root}: no lr to transfer")
    choice = choose_lr([r["lr"] for r in done], [r["val_loss"] for r in done])
    return {"model": model, "mup": mup, "lrs": list(lrs), "runs": rows, **choice}


def write_record(result: dict, out_dir: Path) -> Path:
    """`transfer/lr-sweep.json` (the sweep's points and the choice) and its plot `lr-sweep.png`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "lr-sweep.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, out_dir / "lr-sweep.png")
    return path


def plot(result: dict, path: Path) -> None:
    import matplotlib  # deferred: matplotlib is heavy and only the report needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # deferred: as above
    import numpy as np  # deferred: as above (a fast scalelab --help)

    pts = [(r["lr"], r["val_loss"]) for r in result["runs"] if r["status"] == "done" and r["val_loss"] is not None]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o", label="runs")
    if result.get("coef"):
        a, b, c = result["coef"]
        x = np.linspace(np.log(result["fit_lrs"][0]), np.log(result["fit_lrs"][-1]), 100)
        ax.plot(np.exp(x), a * x**2 + b * x + c, "-", lw=1, label="parabola in log lr (best lr and neighbours)")
    ax.axvline(result["lr"], color="k", ls="--", lw=1, label=f"chosen lr {result['lr']:.3g} ({result['method']})")
    ax.set_xscale("log")
    ax.set_xlabel("peak lr")
    ax.set_ylabel("final validation loss")
    ax.set_title(
        f"lr sweep: {result['model']} under μP (base width {result['mup']['model.mup_base_width']})", fontsize=9
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
