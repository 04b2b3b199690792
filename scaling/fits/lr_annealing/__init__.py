"""`scalelab fit lr-annealing` (Tissue et al. 2024): loss curves read from tables or runs
(curves.py), the objective and its optimiser (objective.py), the fit (fit.py) and its record
(record.py). The law itself is `scaling.laws.lr_annealing`."""
