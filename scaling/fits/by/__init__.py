"""`fit chinchilla|batch-lr --by KEY`: one law per value of a key (groups.py) and their comparison
by compute multiplier at matched loss (compare.py)."""
