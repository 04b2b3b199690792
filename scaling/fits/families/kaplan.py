"""`scalelab fit kaplan`: Kaplan et al. 2020's L(N, D), or L(N), L(D) (scaling.fits.kaplan)."""

from __future__ import annotations

from scaling.fits import flags as F
from scaling.fits.family import Flag, LawFamily, register


def fit(args, ds):
    from scaling.fits.kaplan import fit_kaplan  # deferred: numpy (a fast --help)

    return fit_kaplan(
        ds,
        seed=args.seed,
        ci=args.ci,
        form=args.form,
        drop_highest_k=args.drop_highest,
        bootstrap=args.bootstrap,
        holdout=args.holdout,
    )


FAMILY = register(
    LawFamily(
        name="kaplan",
        help="Kaplan L(N,D) = [(Nc/N)^(aN/aD) + Dc/D]^aD, or L(N), L(D)",
        flags=(
            *F.common(),
            Flag("--form", choices=["nd", "n", "d"], default="nd", help="nd (default), n = L(N), d = L(D)"),
            Flag("--drop-highest", type=int, default=0, metavar="K"),
            Flag("--holdout", choices=["largest"]),
        ),
        load=F.load_table,
        fit=fit,
        summary=F.loss_law_summary,
        plot=F.plot_table,
    )
)
