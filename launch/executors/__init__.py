"""Executors start the runs of a plan where the compute is: local | slurm | deepspeed (multi-node).

Every executor starts runs through `launch.run.worker` semantics (lock, skip done/failed, log file),
so idempotence and recovery behave the same everywhere.
"""
