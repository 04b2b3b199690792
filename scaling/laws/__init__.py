"""The scaling laws as small objects: loss laws (loss.py), hyperparameter laws (hparams.py), MoE laws
(moe.py), the lr-annealing law (lr_annealing.py), compute-optimal allocation (allocation.py), the
compute multiplier between two laws (multiplier.py), loss predictions with intervals (prediction.py)
and the law of a fit record (registry.py)."""
