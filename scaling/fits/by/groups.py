"""One law per value of a key (`scalelab fit chinchilla|batch-lr DATA --by KEY`): split, fit, record.

KEY is a dotted config key (`optim.name`) for a run-directory tree, read from each run's resolved
config.yaml (a key added to the schema after a run was written takes its schema default,
`rundir.read.CONFIG_DEFAULTS`: a run without `optim.name` trained with adamw), or a column name
for a table. Every group is fitted by the law's own fitter with the same settings (its bootstrap
seeded seed + the group's position, so groups resample independently), and the record holds each
group's full record under `groups`, its data points (`points`, for plots) and whether it is
identified. The chinchilla record adds `compare` (scaling.fits.by.compare).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from rundir.dotted import has_dotted
from rundir.files import read_yaml
from rundir.layout import CONFIG
from rundir.read import CONFIG_DEFAULTS, config_value
from scaling.core.errors import FitError, InputError
from scaling.data import inputs
from scaling.data.table_files import read_table
from scaling.fits.record import data_sha256

# the group's own warnings that mean its law cannot be read (as dashboard.stores.fit_checks judges them)
_UNIDENTIFIED = re.compile(r"not (separately )?identified|stopped on its bound", re.I)
POINT_COLUMNS = ("N", "D", "loss", "flops", "lr", "batch_tokens", "run")


def _label(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def group_values(ds: inputs.Dataset, data, key: str) -> tuple[np.ndarray, str]:
    """The value of `key` for each row of `ds` (as text) and where it came from ("config" | "column")."""
    import pandas as pd  # deferred: pandas is slow to import

    if not key or not key.strip():
        raise InputError("--by needs a key: a dotted config key such as optim.name, or a table column")
    raw = None
    if isinstance(data, pd.DataFrame):
        raw = data
    else:
        src = Path(str(data if not isinstance(data, inputs.Dataset) else ds.source))
        if src.is_dir():
            return _config_values(ds, key), "config"
        if not src.exists():
            raise InputError(f"--by {key}: the table behind this data ({src}) is not readable")
        raw = read_table(src)
    if key not in raw.columns:
        raise InputError(f"--by {key}: no column '{key}' in the table (columns: {', '.join(map(str, raw.columns))})")
    col = raw[key].reset_index(drop=True)
    if len(col) != len(ds.df):  # the canonical table keeps every row of the raw one, in order
        raise InputError(f"--by {key}: the table has {len(col)} rows but {len(ds.df)} were read")
    bad = np.flatnonzero(col.isna().to_numpy())
    if bad.size:
        raise InputError(f"--by {key}: column '{key}' is empty in {bad.size} row(s), first at row {int(bad[0])}")
    return np.array([_label(v) for v in col], dtype=object), "column"


def _config_values(ds: inputs.Dataset, key: str) -> np.ndarray:
    if "path" not in ds.df.columns:
        raise InputError(f"--by {key}: the runs' directories are not known, so their config.yaml cannot be read")
    out: list[str | None] = []
    missing: list[str] = []
    for run, path in zip(ds.df.get("run", ds.df["path"]), ds.df["path"]):
        try:
            cfg = read_yaml(Path(path) / CONFIG)
        except (FileNotFoundError, OSError, ValueError):
            cfg = None
        if not isinstance(cfg, dict):
            cfg = None
        if cfg is None or (not has_dotted(cfg, key) and key not in CONFIG_DEFAULTS):
            missing.append(str(run))
            out.append(None)
            continue
        v = config_value(cfg, key)
        if isinstance(v, dict):
            raise InputError(
                f"--by {key}: '{key}' is a section of the config, not "
                f"a value (e.g. {key}.{next(iter(v), '')} in run {run})"
            )
        if isinstance(v, list):
            raise InputError(f"--by {key}: '{key}' is a list in run {run}, not a value")
        out.append(_label(v))
    if missing:
        raise InputError(
            f"--by {key}: {len(missing)} of {len(out)} runs' config.yaml have no key '{key}' (e.g. {missing[0]}); "
            "give a dotted key of the resolved config, such as optim.name or model.n_layers"
        )
    return np.array(out, dtype=object)


def order(values: np.ndarray, baseline: str | None, default_baseline: str | None = "adamw") -> tuple[list[str], str]:
    """The groups (baseline first, then sorted) and the baseline: --baseline, else `default_baseline`
    when present, else the first value in sorted order."""
    uniq = sorted(set(values.tolist()), key=lambda v: (_numeric(v) is None, _numeric(v) or 0.0, v))
    if baseline is not None:
        if baseline not in uniq:
            raise InputError(f"--baseline {baseline}: not a value of the --by key (values: {', '.join(uniq)})")
        base = baseline
    else:
        base = default_baseline if default_baseline is not None and default_baseline in uniq else uniq[0]
    return [base] + [v for v in uniq if v != base], base


def _numeric(v: str) -> float | None:
    try:
        return float(v)
    except ValueError:
        return None


def subset(ds: inputs.Dataset, mask: np.ndarray) -> inputs.Dataset:
    return inputs.Dataset(
        df=ds.df[mask].reset_index(drop=True),
        source=ds.source,
        n_kind=ds.n_kind,
        columns=dict(ds.columns),
        warnings=[],
        n_source=ds.n_source,
    )


def unidentified(rec: dict) -> list[str]:
    """The group record's own warnings that say its law is not identified or stopped on a bound."""
    out = []
    for w in rec.get("warnings") or []:
        m = re.search(r"on its bound in (\d+) of (\d+) bootstrap", w)
        if (m and int(m[1]) * 2 >= int(m[2])) or (not m and _UNIDENTIFIED.search(w)):
            out.append(w)
    return out


def fit_groups(
    fit_fn, ds: inputs.Dataset, values: np.ndarray, groups: list[str], key: str, *, seed: int, **kwargs
) -> tuple[dict, list[str]]:
    """{value: group entry} and the warnings: each group fitted by `fit_fn(sub_ds, seed=..., **kwargs)`.
    A group whose fit is refused (too few points, degenerate) is kept with `fitted: false` and why."""
    out, warnings = {}, []
    for i, g in enumerate(groups):
        sub = subset(ds, values == g)
        entry: dict = {"n_points": int(len(sub.df)), "points": _points(sub.df)}
        try:
            rec = fit_fn(sub, seed=seed + i, **kwargs)
        except (InputError, FitError) as exc:
            entry.update(fitted=False, identified=False, reason=str(exc))
            warnings.append(f"{key}={g}: not fitted, so not identified: {exc}")
            out[g] = entry
            continue
        why = unidentified(rec)
        entry.update(fitted=True, identified=not why, record=dict(rec))
        if why:
            entry["reason"] = "; ".join(why)
            warnings.append(f"{key}={g}: its law is not identified: {entry['reason']}")
        warnings += [f"{key}={g}: {w}" for w in rec.get("warnings") or [] if w not in why]
        out[g] = entry
    if not any(e["fitted"] for e in out.values()):
        raise InputError(
            f"--by {key}: no group could be fitted: " + "; ".join(f"{g}: {e['reason']}" for g, e in out.items())
        )
    if len(groups) == 1:
        warnings.append(f"--by {key}: every run has {key}={groups[0]}; there is nothing to compare")
    return out, warnings


def _points(df) -> list[dict]:
    cols = [c for c in POINT_COLUMNS if c in df.columns]
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in df[cols].to_dict("records")
    ]


def by_settings(key: str, kind: str, baseline: str | None, groups: list[str], seed: int) -> dict:
    return {
        "key": key,
        "from": "config.yaml of each run (a missing key takes its schema default)"
        if kind == "config"
        else "table column",
        "values": groups,
        "baseline": baseline,
        "seed_per_group": {g: seed + i for i, g in enumerate(groups)},
    }


def sha(ds: inputs.Dataset, values: np.ndarray, cols) -> str:
    codes = {v: i for i, v in enumerate(sorted(set(values.tolist())))}
    return data_sha256(ds.df.assign(by_code=[codes[v] for v in values]), list(cols) + ["by_code"])
