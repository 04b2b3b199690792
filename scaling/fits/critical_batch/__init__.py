"""Critical batch size from steps-to-target-loss vs batch size (McCandlish et al. 2018).

Per (model size, target loss): fit S(B) = S_min (1 + B_crit/B) = S_min + E_min / B to the number
of optimizer steps S a run with batch B (tokens) needed to first reach the target loss, by least
squares on log S with S_min, E_min > 0. **B_crit = E_min / S_min** (tokens): the batch at which
both steps and tokens are twice their minima. Zhang et al. 2024 report instead the batch with a
20% step overhead over linear scaling from a reference batch B_ref: B_20 = B_crit/5 + 1.2 B_ref
(their notebook's formula with B_ref = 256 sequences); we give it with B_ref = the smallest batch
tested. Each batch size counts its fastest learning rate (McCandlish assumes a tuned lr), repeats
of one (batch, lr) cell enter as their geometric mean.

Inputs: a run-directory tree (steps to target read from each run's metrics.jsonl curve, see
scaling/fits/steps_to_target.py) or a table with columns N, batch_tokens, steps (already steps to a
target) and optionally loss (that target; rows of one model with different targets are separate
fits) and lr.

Across (model, target) fits: B_crit = bcrit_coef N^bcrit_exp_N on each model's lowest target;
B_crit = bcrit_coef_D D^bcrit_exp_D on every fit, D = 2 E_min = tokens to reach the target when
training at B_crit (Zhang et al. 2024, Bergsma et al. 2025: B_crit follows D, not N); jointly
B_crit = bcrit_joint_coef N^bcrit_joint_exp_N D^bcrit_joint_exp_D when N and D are not collinear;
and Kaplan's B_crit(L) = B_star / L^(1/alphaB) over targets.

The subpackage: the points read from a table or a run tree (points.py), one S(B) fit per (model, target)
and the record's rows (mccandlish.py), the laws across fits and the holdout (laws.py), the bootstrap
(bootstrap.py), the fit that joins them (fit.py) and its record (record.py).
"""

from __future__ import annotations

from scaling.fits.critical_batch.bootstrap import MIN_BOOT
from scaling.fits.critical_batch.fit import D_DEFINITION, DEFINITION, OVERHEAD20, fit_critical_batch
from scaling.fits.critical_batch.mccandlish import IDENTIFIED_FACTOR, MIN_BATCHES, fit_steps_curve
from scaling.fits.critical_batch.record import CriticalBatchRecord

__all__ = [
    "DEFINITION",
    "D_DEFINITION",
    "IDENTIFIED_FACTOR",
    "MIN_BATCHES",
    "MIN_BOOT",
    "OVERHEAD20",
    "CriticalBatchRecord",
    "fit_critical_batch",
    "fit_steps_curve",
]
