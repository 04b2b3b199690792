"""`scalelab fit kaplan`: Kaplan et al. 2020's L(N, D), or L(N), L(D) (scaling.fits.kaplan)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scaling.fits import flags as F
from scaling.fits.family import Flag, LawFamily, options_from, register
from scaling.fits.options import FitOptions


@dataclass(frozen=True)
class KaplanOptions(FitOptions):
    """fit_kaplan's choices: form nd (L(N, D)), n (L(N)) or d (L(D)); drop the K highest-loss points first."""

    form: str = "nd"
    drop_highest_k: int = 0


def fit(args, ds):
    from scaling.fits.kaplan import fit_kaplan  # deferred: numpy (a fast --help)

    return fit_kaplan(ds, **asdict(options_from(KaplanOptions, args)))


def predict(rec, data, columns, ci: float, seed: int):
    """Loss at new points: L(N, D), L(N) or L(D) by the record's form."""
    from scaling.fits import loss_prediction as P  # deferred: numpy (a fast --help)

    return P.predict_loss_rows(rec, data, columns, ci, seed, roles=P.kaplan_roles, model=P.kaplan_model)


FAMILY = register(
    LawFamily(
        name="kaplan",
        help="Kaplan L(N,D) = [(Nc/N)^(aN/aD) + Dc/D]^aD, or L(N), L(D)",
        flags=(
            *F.common(),
            Flag("--form", choices=["nd", "n", "d"], default="nd", help="nd (default), n = L(N), d = L(D)"),
            Flag("--drop-highest", dest="drop_highest_k", type=int, default=0, metavar="K"),
            Flag("--holdout", choices=["largest"]),
        ),
        options=KaplanOptions,
        load=F.load_table,
        fit=fit,
        predict=predict,
        summary=F.loss_law_summary,
        plot=F.plot_table,
    )
)
