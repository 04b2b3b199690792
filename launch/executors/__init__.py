"""Executors start the runs of a plan where the compute is: local | slurm | deepspeed (multi-node).

Every executor starts runs through `launch.run.worker` semantics (lock, skip done/failed, log file),
so idempotence and recovery behave the same everywhere.
"""

# where the tasks of `scalelab data prepare --tasks K` run (launch.executors.data_tasks); here so the
# CLI lists them without importing numpy or tokenizers
DATA_EXECUTORS = ("local", "slurm", "ray")
