"""`scalelab dashboard`: a local, read-only web app over run directories and fit records.

cli.py (the command) -> server.py (FastAPI routes) -> views/ (one figure builder per page; api joins
them) -> stores/ (cached readers: runs, fits, fit_data, fit_checks, lineage) -> security.py (every
path confined to the roots); demo/ builds a real tiny study for the docs' screenshots. The browser
side is static/ (vanilla JS views + Plotly served from the installed package).
"""
