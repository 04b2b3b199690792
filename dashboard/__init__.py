"""`scalelab dashboard`: a local, read-only web app over run directories and fit records.

server.py (FastAPI routes) -> runs.py / fits.py (cached readers) -> security.py (id checks);
the browser side is static/ (vanilla JS views + Plotly served from the installed package).
"""
