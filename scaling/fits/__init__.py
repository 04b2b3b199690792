"""The fitters: one module (or subpackage) per law family, all through the shared steps of
pipeline.py (validate, fit, bootstrap, holdout, record), and the fit record they write."""
