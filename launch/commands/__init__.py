"""The commands the top layer owns itself (`scalelab data`, `runs`, `predict-curve`); the others are registered
by their packages' `cli` modules (see `launch.cli.SUBSYSTEMS`)."""
