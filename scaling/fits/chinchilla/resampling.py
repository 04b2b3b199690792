"""How a Chinchilla fit's bootstrap resamples (whole runs when the rows are points of training curves) and
how it says a parameter is not pinned down by the runs; shared by approach 3 and approaches 1-2."""

from __future__ import annotations

from scaling.core import bootstrap as bs

IDENTIFIED_RATIO = 2.0  # a 95% interval wider than this factor means the runs do not pin the parameter down


def identification(intervals: dict, warnings: list[str], keys=("E", "alpha", "beta")) -> None:
    """Say plainly when the bootstrap shows a parameter is not pinned down by the runs."""
    for k in keys:
        iv = intervals.get(k)
        if iv and iv[0] > 0 and iv[1] / iv[0] > IDENTIFIED_RATIO:
            warnings.append(
                f"{k} is poorly identified: its interval [{iv[0]:.3g}, "
                f"{iv[1]:.3g}] spans a factor {iv[1] / iv[0]:.3g}; "
                "the runs do not pin it down (widen the range of N and D)"
            )
        elif iv and iv[0] <= 0 < iv[1]:
            warnings.append(f"{k} is not identified: its interval [{iv[0]:.3g}, {iv[1]:.3g}] includes 0")


def resample_runs(df, n: int, n_boot: int, seed: int, curves: bool) -> tuple[list, str]:
    """Resample runs: whole runs when rows are points of training curves, rows otherwise.
    Returns (index arrays, the method as the record states it)."""
    if curves:
        return bs.resample_clusters(
            df["run"].to_numpy(), n_boot, seed
        ), "resample runs (all points of a run together) with replacement; percentile intervals"
    return bs.resample_indices(n, n_boot, seed), "resample runs with replacement; percentile intervals"
