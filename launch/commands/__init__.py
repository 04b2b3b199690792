"""The commands the top layer owns itself (`scalelab runs`, `scalelab predict-curve`); the others are registered
by their packages' `cli` modules (see `launch.cli.SUBSYSTEMS`)."""
