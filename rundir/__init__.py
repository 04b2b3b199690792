"""The run-directory contract: every name in a run directory, and the one reader of it.

A run directory (`runs/<sweep>/<run>/`) is what the trainer, sweeps, fitter, evaluation and
dashboard share (docs/ARCHITECTURE.md). Modules:
  layout       every file and marker name; `RunDir`, the paths of one run
  files        atomic writes, tolerant reads
  summary      `summary.json` as a typed, versioned `RunSummary`
  metrics      `metrics.jsonl`: the trainer's writer, whole/tail/incremental readers
  checkpoints  which `checkpoints/step_<N>` count, which one a path means
  lock         the lock holder record and the non-blocking probe
  read         run directories -> states (`run_status`) and registry rows (`load_runs`)
  write        a run directory from parts, without training (tests, the dashboard demo, synthetic data)
  config, tokenizer   a run's model section and its own tokenizer
  schedules    the lr a run's schedule section implies at every step
  dotted       dotted keys (`optim.name`) read from nested dicts that were never validated
  accelerators accelerator peak FLOP/s and memory by device and precision (cost projections, MFU, dry runs)
  weights      the trained model itself (torch; only evaluation and export import it)
Everything but `weights` is torch-free, so the dashboard and the scaling-law fitter use it.
"""
