"""Errors the user can fix. The CLI turns them into a message and exit code 2."""

from base.errors import ConfigError, UserError

__all__ = ["ConfigError", "DataError", "TasksFailed", "TrainingFailed"]  # ConfigError: base's, raised by every loader


class DataError(UserError, RuntimeError):
    """Input data is missing, empty or unreadable."""


class TrainingFailed(RuntimeError):
    """A run stopped abnormally (NaN loss, ...); the last good checkpoint is kept."""


class TasksFailed(DataError):
    """Tasks of a preparation in tasks ran and failed (exit 1, not bad input); a rerun runs only them."""
