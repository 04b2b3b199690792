"""The one base of every error a user can fix (a wrong key or value, missing data, a bad fit input...).

Each layer names its own subclass (`scaling.core.errors.InputError`, `pretrain.errors.DataError`, ...) so a
message says where it came from; the `scalelab` CLI catches this base once: `error: ...` and exit code 2."""


class UserError(Exception):
    """The user can fix this; nothing was done, or everything finished before it was kept."""

    exit_code = 2


class ConfigError(UserError, ValueError):
    """A configuration key or value is wrong; raised before any work starts (by every config loader, from
    base/config_files.py up: `pretrain.errors` names it too)."""
