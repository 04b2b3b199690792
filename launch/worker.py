"""Kept for one release: Slurm scripts submitted before the move run `python -m launch.worker`; the worker is
`launch.run.worker`."""

from launch.run.worker import main

if __name__ == "__main__":
    raise SystemExit(main())
