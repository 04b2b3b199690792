"""`scalelab fit chinchilla`: approaches 1 and 2 (isoflop.py: the envelope and the IsoFLOP parabolas;
frontier.py: the frontier fit and its bootstrap), approach 3 by summed Huber (huber_fit.py) or maximum
likelihood (mle.py), the data-constrained law, how the bootstrap resamples (resampling.py), and the entry
point that chooses among them (approaches.py: `fit_chinchilla`)."""
