"""The scaling commands: `scalelab fit <law>` (fit.py), `scalelab predict`
(predict.py), `scalelab plan` (plan.py) and `scalelab model design` (design.py, registered by
launch/cli.py on its own).

Every module here imports only argparse-level code at module top: the fits, plans and their numpy,
scipy, pandas and pydantic are imported inside the command functions, so `scalelab --help` stays fast.
"""

from __future__ import annotations


def register(subparsers) -> None:
    """`fit`, `predict` and `plan`, in that order (launch/cli.py calls this)."""
    from scaling.cli import fit, plan, predict  # deferred: imports numpy/pydantic (a fast scalelab --help)

    fit.register(subparsers)
    predict.add_parser(subparsers)
    plan.register(subparsers)
