"""`python -m evals.lm_eval_main ...`: lm-eval's own CLI with the `scalelab` model registered.

lm-eval 0.4.13 has no plugin discovery for third-party models: a model name exists once the
module defining it is imported. This wrapper imports `evals.adapter` and hands over to lm-eval,
e.g. `python -m evals.lm_eval_main run --model scalelab --model_args path=runs/x --tasks piqa`.
For the bundled offline task copies use `scalelab eval` (it writes the task directory).
"""
from __future__ import annotations

import evals.adapter  # noqa: F401 - registers "scalelab"


def main() -> None:
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main()
