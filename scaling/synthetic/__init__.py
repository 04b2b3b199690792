"""SYNTHETIC data with known truth, for tests, demos and checking the fits -- never results: runs
drawn from the loss and hyperparameter laws (runs.py), training curves with a known critical batch
(curves.py) and MoE runs (moe.py)."""
