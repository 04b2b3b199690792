"""What the MoE runs' design lets a law identify, and the shape a plan builds on.

`design_section`: the data's expert counts, granularities, expansion rate (E / G) and top-k per
unit of granularity among the MoE runs (E > 1), the counts of dense and MoE runs, and their tokens.
`design_warnings`: what the design cannot identify or mixes (said in the record).
`bound_warnings`, `interval_warnings`: a fitted parameter on its box, or one the bootstrap shows
the runs do not pin down. `moe_recipe`: the `model.moe` settings the MoE runs share (router, capacity factor,
...), which an emitted config reproduces, like `scaling.data.recipe` does for the training settings.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import yaml

from rundir.layout import CONFIG
from scaling.core.diagnostics import at_bound
from scaling.core.selection import distinct

SHAPE_KEYS = ("num_experts", "top_k", "d_ff")  # what the law and the plan set; the rest is recipe
IDENTIFIED_RATIO = 2.0  # a 95% interval wider than this factor: the runs do not pin the parameter down


def _mode(values):
    vals = [round(float(v), 9) for v in values if v == v]
    return Counter(vals).most_common(1)[0][0] if vals else None


def _fmt(values) -> str:
    return ", ".join(f"{v:g}" for v in sorted(set(round(float(x), 9) for x in values)))


def design_section(df) -> dict:
    out: dict = {"n_runs": int(len(df))}
    E = df["E"].to_numpy(float) if "E" in df.columns else None
    moe = E > 1 if E is not None else np.ones(len(df), dtype=bool)
    out["dense_runs"] = int((~moe).sum())
    out["moe_runs"] = int(moe.sum())
    for k in ("E", "G"):
        if k in df.columns:
            out[k] = sorted({float(v) for v in df[k].to_numpy(float)})
    if "G" in df.columns and moe.any():
        out["G_moe"] = _mode(df["G"].to_numpy(float)[moe])
    if E is not None and "G" in df.columns and moe.any():
        exp = E[moe] / df["G"].to_numpy(float)[moe]
        out["expansion"], out["expansions"] = _mode(exp), sorted(set(np.round(exp, 9).tolist()))
    if "top_k" in df.columns and moe.any():
        k = df["top_k"].to_numpy(float)[moe]
        out["top_k"] = _mode(k)
        if "G" in df.columns:
            out["top_k_per_G"] = _mode(k / df["G"].to_numpy(float)[moe])
    if "D" in df.columns:
        D = df["D"].to_numpy(float)
        out["D_geomean"] = float(np.exp(np.mean(np.log(D))))
    return out


def design_warnings(df, law: str) -> list[str]:
    out: list[str] = []
    E = df["E"].to_numpy(float) if "E" in df.columns else None
    if law == "krajewski":
        G = df["G"].to_numpy(float)
        nG = distinct(G)
        if nG == 1:
            out.append(
                f"not identified: every run has G = {G[0]:g}: g and gamma "
                "cannot be estimated; fitted without the granularity "
                "term (g = 0, gamma null), so the law predicts no effect of granularity"
            )
        elif nG == 2:
            out.append(
                f"not identified: only 2 granularities (G = {_fmt(G)}): "
                "g, gamma and a trade off (the runs fix only the N "
                "coefficient at each G), so the law between and beyond them is arbitrary; add a third granularity"
            )
        elif nG == 3:
            out.append(f"weakly identified: only 3 granularities (G = {_fmt(G)}) for g, gamma and a")
        if E is None:
            out.append(
                "no E column: the runs' expert counts are unknown (a plan "
                "cannot size experts; dense runs cannot be told apart)"
            )
            return out
        moe = E > 1
        if moe.any():
            exp = E[moe] / G[moe]
            if distinct(exp, 1e-3) > 1:
                out.append(
                    "the Krajewski law has no expansion-rate term (E / G): the "
                    f"MoE runs' expansion rates {_fmt(exp)} are fitted as one "
                    "law (the paper fixes it); --law clark models the expert count"
                )
            if (~moe).any() and np.any(np.abs(G[moe] - 1) < 1e-9):
                out.append(
                    "dense runs (E = 1) and MoE runs at G = 1 are the same "
                    "point to the law (G = 1): it cannot tell them apart"
                )
        if not (~moe).any():
            out.append("no dense runs (E = 1): the law's G = 1 baseline is a coarse-grained MoE, not a dense model")
    else:
        if "D" in df.columns:
            D = df["D"].to_numpy(float)
            if D.max() / D.min() > 1.05:
                out.append(
                    f"Clark's law has no data term (the paper trained every model on the same tokens): these runs span "
                    f"D = {D.min():.3g}-{D.max():.3g} tokens, whose effect the law attributes to N and E"
                )
        else:
            out.append("no D column: the record has no compute convention and `plan` cannot size the tokens")
        if "G" in df.columns and E is not None and np.any(np.abs(df["G"].to_numpy(float)[E > 1] - 1) > 1e-9):
            out.append(
                "Clark's law was stated for experts the size of the dense FFN (G "
                "= 1): runs with G != 1 are fitted by their expert count E alone"
            )
    return out


def moe_recipe(paths) -> dict | None:
    """{moe: the most common model.moe section of the MoE runs without the shape keys, varies: keys
    that differ, n_runs} from the runs' config.yaml; None without MoE runs."""
    sections = []
    for p in paths:
        try:
            cfg = yaml.safe_load((Path(str(p)) / CONFIG).read_text())
        except (OSError, yaml.YAMLError):
            continue
        moe = ((cfg or {}).get("model") or {}).get("moe") if isinstance(cfg, dict) else None
        if isinstance(moe, dict):
            sections.append({k: v for k, v in moe.items() if k not in SHAPE_KEYS})
    if not sections:
        return None
    common = json.loads(Counter(json.dumps(s, sort_keys=True) for s in sections).most_common(1)[0][0])
    varies = sorted(k for k in {k for s in sections for k in s} if len({json.dumps(s.get(k)) for s in sections}) > 1)
    return {"moe": common, "varies": varies, "n_runs": len(sections)}


def bound_warnings(x, names, bounds, warnings) -> None:
    why = {
        "lg": "g -> 0: granularity shows no effect in these runs",
        "gamma": "granularity's exponent runs away",
        "lc": "the irreducible loss c runs away",
    }
    for k, v in zip(names, x):
        lo, hi = bounds[k]
        if at_bound(v, lo, hi):
            warnings.append(
                f"parameter {k} stopped on its bound ({v:.6g}; bounds "
                f"[{lo}, {hi}]): the fit is not at an interior optimum" + (f" ({why[k]})" if k in why else "")
            )


def interval_warnings(intervals: dict, keys, warnings, ratio: bool = True) -> None:
    """Say plainly when the bootstrap shows a parameter is not pinned down by the runs."""
    for k in keys:
        iv = intervals.get(k)
        if not iv:
            continue
        if iv[0] <= 0 <= iv[1] and k in ("gamma", "b", "c"):
            warnings.append(f"{k} is not identified: its interval [{iv[0]:.3g}, {iv[1]:.3g}] includes 0")
        elif ratio and iv[0] > 0 and iv[1] / iv[0] > IDENTIFIED_RATIO:
            warnings.append(
                f"{k} is poorly identified: its interval [{iv[0]:.3g}, {iv[1]:.3g}] spans a factor {iv[1] / iv[0]:.3g}"
            )
