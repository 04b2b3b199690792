"""`scalelab fit critical-batch`: steps to a target loss against the batch, S = S_min (1 + B_crit/B)
(scaling.fits.critical_batch)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from scaling.fits import flags as F
from scaling.fits.family import Flag, LawFamily, options_from, register
from scaling.fits.options import FitOptions


@dataclass(frozen=True)
class CriticalBatchOptions(FitOptions):
    """fit_critical_batch's choices: the target losses read from curves (None: 3 per model), the
    curve (loss | val_loss) and its smoothing (None: the metric's default)."""

    target_loss: list[float] | None = None
    metric: str = "loss"
    smooth: float | None = None


def fit(args, ds):
    from scaling.fits.critical_batch import fit_critical_batch  # deferred: numpy (a fast --help)

    return fit_critical_batch(ds, **asdict(options_from(CriticalBatchOptions, args)))


FAMILY = register(
    LawFamily(
        name="critical-batch",
        help="steps-to-target vs batch: S = S_min (1 + B_crit/B) per model and target, B_crit(N), B_crit(D)",
        flags=(
            *F.common(),
            Flag(
                "--target-loss",
                type=F.positive_float,
                action="append",
                metavar="L",
                help="run directories: target loss whose first crossing is read from each curve "
                "(repeatable; default: 3 per model, chosen so every batch size reaches them)",
            ),
            Flag(
                "--metric",
                choices=["loss", "val_loss"],
                default="loss",
                help="run directories: curve to read from metrics.jsonl (default: training loss)",
            ),
            Flag(
                "--smooth",
                type=float,
                metavar="F",
                help="run directories: smoothing window, relative half-width "
                "in steps (default 0.1 for loss, 0 for val_loss; 0 = none)",
            ),
            Flag(
                "--holdout",
                choices=["largest"],
                help="predict the largest-compute model's B_crit from the laws fitted on the other models",
            ),
        ),
        options=CriticalBatchOptions,
        load=F.load_table,
        fit=fit,
        summary=F.loss_law_summary,
        plot=F.plot_table,
    )
)
