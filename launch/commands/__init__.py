"""The commands the top layer owns itself: `scalelab sweep` (sweep.py; sweep_eval, sweep_cancel and the
pre-flight checks beside it: they dispatch to the executors, so they sit above them), `data`, `runs` and
`predict-curve`; the others are registered by their packages' `cli` modules (see `launch.cli.SUBSYSTEMS`)."""
