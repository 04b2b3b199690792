"""Validation and quoting of the user strings that go into an sbatch script.

`#SBATCH` lines are read by sbatch, the rest of the script by bash: a newline in a partition name
would end the directive and run the remainder as a shell line. So every string field is checked
when the spec is loaded (a bad one is a config error naming its key: exit 2 before anything is
queued) and every directive value is quoted when the script is written (sbatch strips the quotes).
"""

from __future__ import annotations

import re
import shlex

# Slurm partition/account/qos names (comma lists allowed): no whitespace, quotes or shell syntax.
NAME = re.compile(r"^[A-Za-z0-9_.+@%:-]+(,[A-Za-z0-9_.+@%:-]+)*$")
MEM = re.compile(r"^\d+[KMGTkmgt]?$")
TIME = re.compile(r"^(\d+-)?\d+(:\d+){0,2}$|^(INFINITE|UNLIMITED|infinite|unlimited)$")
DIRECTIVE = re.compile(r"^(--?)([A-Za-z][A-Za-z0-9-]*)(?:([= ])(.+))?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def no_control(value: str, what: str) -> str:
    """Reject newlines and other control characters (they end or corrupt a script line)."""
    m = _CONTROL.search(value)
    if m:
        raise ValueError(f"{what} contains a control character ({m.group()!r}); use one line of printable text")
    return value


def check_name(value: str | None) -> str | None:
    if value is None:
        return None
    no_control(value, "the value")
    if not NAME.match(value):
        raise ValueError(
            f"{value!r} is not a Slurm name: letters, digits and _ . + @ % : - (comma-separated for a list)"
        )
    return value


def check_mem(value: str | None) -> str | None:
    if value is not None and not MEM.match(no_control(value, "the value")):
        raise ValueError(
            f"{value!r} is not a Slurm memory size: an integer with an optional K, M, G or T suffix (e.g. 64G)"
        )
    return value


def check_time(value: str | None) -> str | None:
    if value is not None and not TIME.match(no_control(value, "the value")):
        raise ValueError(
            f"{value!r} is not a Slurm time: minutes, [days-]hours:minutes:seconds (e.g. 04:00:00, 1-12:00:00) "
            f"or UNLIMITED"
        )
    return value


def check_directive(value: str) -> str:
    """One extra #SBATCH directive: `--name`, `--name=value`, `name=value` or `-X value`."""
    no_control(value, f"directive {value!r}")
    text = value if value.startswith("-") else f"--{value}"
    m = DIRECTIVE.match(text)
    if not m:
        raise ValueError(f"{value!r} is not an sbatch option (e.g. --constraint=h100)")
    arg = m.group(4)
    if arg is not None and any(c in arg for c in "'\"\\"):
        raise ValueError(f"directive {value!r}: quotes and backslashes are not allowed in its value")
    return value


def check_line(value: str) -> str:
    return no_control(value, f"setup line {value!r}")


def directive(text: str) -> str:
    """Render a validated directive with its value quoted (`--constraint=h100&a100` -> `--constraint='h100&a100'`)."""
    text = text if text.startswith("-") else f"--{text}"
    m = DIRECTIVE.match(text)
    if not m or m.group(4) is None:
        return text
    return f"{m.group(1)}{m.group(2)}{m.group(3)}{shlex.quote(m.group(4))}"


def option(key: str, value: object) -> str:
    """`--key=<quoted value>` for a directive the executor builds itself."""
    return f"--{key}={shlex.quote(str(value))}"
