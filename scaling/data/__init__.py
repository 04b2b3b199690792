"""Reading fit inputs: user tables, run-directory trees (through rundir.read), published data sets,
per-task evaluation points, the runs' training recipe and MoE shapes. Knows no law."""
