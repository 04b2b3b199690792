"""`scalelab fit moe`: the MoE laws, Krajewski et al. 2024's L(N, D, G) and Clark et al. 2022's L(N, E)
(scaling.fits.moe.fit). A law family like those in scaling/fits/families/, kept beside its fit because moe
sits above fits in scaling's layers."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scaling.fits import flags as F
from scaling.fits.family import Flag, LawFamily, options_from, register


@dataclass(frozen=True)
class MoeOptions:
    """fit_moe's choices (scaling.fits.moe.fit: what each means); law: krajewski or clark."""

    law: str = "krajewski"
    holdout: str | None = None
    holdout_fraction: float = 0.1
    bootstrap: int = 0
    seed: int = 0
    ci: float = 0.95
    top_k: int = 32
    delta: float = 1e-3
    at_compute: list[float] | None = None


def fit(args, data):
    from scaling.data.columns import parse_columns  # deferred: with the fit
    from scaling.data.moe_inputs import ROLES  # deferred: numpy (a fast --help)
    from scaling.fits.moe.fit import fit_moe  # deferred: numpy (a fast --help)

    return fit_moe(data, columns=parse_columns(args.col, ROLES), **asdict(options_from(MoeOptions, args)))


def summary(rec) -> str:
    """The record's summary with the MoE law named and its optimum at the largest fitted compute."""
    lines = rec.summary().splitlines()
    lines[0] = f"law: moe ({rec['settings']['law']})"
    derived = rec.get("derived")
    if isinstance(derived, list) and derived:  # krajewski: rows by compute
        cmax = (rec.get("data_range") or {}).get("C", [0, 0])[1]
        row = min(derived, key=lambda r: abs(r["C"] - cmax) / max(r["C"], cmax))
        lines.insert(
            3,
            f"at C = {row['C']:.3g}: best G = {row['G']:g} (fitted range), "
            f"loss {row['loss_opt']:.4f} vs dense {row['dense_loss_opt']:.4f}; "
            f"dense needs {row['compute_multiplier']:.3g}x the compute",
        )
    elif isinstance(derived, dict) and derived.get("rows"):  # clark
        cut = derived.get("cutoff_N")
        lines.insert(3, "experts stop helping beyond N = " + (f"{cut:.3g}" if cut else "(no cutoff: c <= 0)"))
    return "\n".join(lines)


def predict(rec, data, columns, ci: float, seed: int):
    """Loss at new points: Krajewski's L(N, D, G) or Clark's L(N, E), DATA read as fit_moe reads it."""
    from scaling.fits import loss_prediction as P  # deferred: numpy (a fast --help)
    from scaling.fits.moe import prediction as M  # deferred: numpy (a fast --help)

    return P.predict_loss_rows(rec, data, columns, ci, seed, roles=M.roles, model=M.model, read=M.read, check=M.check)


FAMILY = register(
    LawFamily(
        name="moe",
        help="MoE laws: Krajewski L(N, D, G) (default) or Clark L(N, E); N = active non-embedding parameters",
        description="Fit an MoE scaling law to run directories or a table with columns N (active non-embedding "
        "parameters), D, G (granularity), E (experts), loss; dense rows are E = 1, G = 1.",
        flags=(
            F.data_flag("CSV/Parquet table (N, D, G, E, loss) or a run-directory tree (dense and MoE runs)"),
            Flag(
                "--law",
                dest="law",
                choices=["krajewski", "clark"],
                default="krajewski",
                help="krajewski: L = c + (g/G^gamma + a)/N^alpha + b/D^beta "
                "(default); clark: log10 L = a log N + b log E + c log N log E + d",
            ),
            F.col_flag("map a column to a role (N, D, G, E, loss, top_k, flops); repeatable"),
            Flag(
                "--holdout",
                choices=["largest"],
                help="fit without the largest-compute runs and report the loss error on them",
            ),
            Flag(
                "--holdout-fraction",
                type=float,
                default=0.1,
                help="without 3+ compute groups: fraction of runs (largest compute) held out (default 0.1)",
            ),
            F.bootstrap_flag(),
            Flag("--seed", type=int, default=0, help="bootstrap seed"),
            Flag("--ci", type=float, default=0.95, help="interval level (default 0.95)"),
            Flag(
                "--top-k",
                type=int,
                default=32,
                help="krajewski: L-BFGS-B starts from the best of the 108,000-point grid (default 32)",
            ),
            Flag(
                "--delta",
                type=F.positive_float,
                default=1e-3,
                help="Huber delta on log-loss residuals (default 1e-3; Krajewski et al. used 0.1)",
            ),
            Flag(
                "--compute",
                dest="at_compute",
                type=F.positive_float,
                action="append",
                metavar="C",
                help="krajewski: also report the optimum at this compute (repeatable)",
            ),
            F.out_flag(),
            F.json_flag(),
        ),
        options=MoeOptions,
        fit=fit,
        predict=predict,
        summary=summary,
    )
)
