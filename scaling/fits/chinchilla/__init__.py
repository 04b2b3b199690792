"""`scalelab fit chinchilla`: approaches 1 and 2 (isoflop.py), approach 3 by summed Huber
(huber_fit.py) or maximum likelihood (mle.py), the data-constrained law, and the entry point that
chooses among them (approaches.py: `fit_chinchilla`)."""
