"""`python -m evals.lm_eval_main ...`: lm-eval's own CLI with the `scalelab` model registered.

lm-eval 0.4.13 has no plugin discovery for third-party models: a model name exists once the
module defining it is imported. This wrapper imports `evals.adapter` and hands over to lm-eval,
e.g. `python -m evals.lm_eval_main run --model scalelab --model_args path=runs/x --tasks piqa`.
With `--scalelab-local` the bundled offline task copies (evals/tasks over the shared data) are
written to a temporary directory and added with `--include_path`; they take precedence over the
stock tasks of the same name.
"""

from __future__ import annotations

import sys

import evals.adapter  # noqa: F401 - registers "scalelab"
from evals.tasks import data_file, known_tasks, resolve_tasks


def main() -> None:
    from lm_eval.__main__ import cli_evaluate  # deferred: imports lm_eval

    if "--scalelab-local" in sys.argv:
        sys.argv.remove("--scalelab-local")
        p = resolve_tasks([t for t in known_tasks() if data_file(t).exists()])
        sys.argv += ["--include_path", str(p.include_dir)]
        try:
            cli_evaluate()
        finally:
            p.cleanup()
        return
    cli_evaluate()


if __name__ == "__main__":
    main()
