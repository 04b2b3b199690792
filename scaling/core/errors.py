"""Error types the CLI maps to exit codes: InputError -> 2 (user can fix the data), FitError -> 1."""

from __future__ import annotations

from base.errors import UserError


class InputError(UserError, ValueError):
    """The data or the options are unusable (missing column, NaN, too few points...).

    Raised before any fitting work so the CLI can print one `error: ...` line and exit 2.
    """


class FitError(RuntimeError):
    """The fit itself failed (no start converged, degenerate data found during fitting)."""
