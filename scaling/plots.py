"""Compatibility shim for one release: `scaling.plots` moved to `scaling.fits.plots` (notebooks import
`plot_fit` from here). New code uses `from scaling import plot_fit` or `scaling.fits.plots`."""

from __future__ import annotations

from scaling.fits.plots import plot_fit

__all__ = ["plot_fit"]
