"""The run-directory contract: every name in a run directory, and the one reader of it.

A run directory (`runs/<sweep>/<run>/`) is what the trainer, sweeps, fitter, evaluation and
dashboard share. This package names its files (`layout`), writes them atomically (`files`),
types `summary.json` (`summary`), appends and reads `metrics.jsonl` (`metrics`), lists
checkpoints (`checkpoints`), reads the lock holder (`lock`) and turns run directories into rows
and states (`read`). It imports neither torch nor the trainer, so the dashboard and the
scaling-law fitter can use it; the one module that loads weights (`weights`, torch) is imported
only by those that run a model (evaluation, export).
"""
