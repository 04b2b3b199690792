"""`scalelab dashboard`: serve the dashboard for a runs root (and optional fits root).

Binds 127.0.0.1 unless --host says otherwise: the app has no authentication, so exposing it is
an explicit choice.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "dashboard",
        help="local read-only web dashboard for runs, evals, fits and MoE routers",
        description="Serve a local web dashboard over run directories and fit records (read-only).",
    )
    p.add_argument("--runs", default="runs", metavar="DIR", help="runs root (runs/<sweep>/<run>/), default: runs")
    p.add_argument(
        "--fits", default=None, metavar="DIR", help="directory of fit records (*.json from `scalelab fit --out`)"
    )
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8050, help="port (default 8050; 0 picks a free one)")
    p.add_argument("--refresh-s", type=float, default=1.0, help="minimum seconds between rescans of the runs root")
    p.set_defaults(func=run)


def run(args) -> int:

    import uvicorn  # deferred: imports uvicorn

    from dashboard.server import create_app  # deferred: imports fastapi

    runs = Path(args.runs)
    if not runs.is_dir():
        print(f"error: runs directory {runs} does not exist", file=sys.stderr)
        return 2
    if args.fits and not Path(args.fits).is_dir():
        print(f"error: fits directory {args.fits} does not exist", file=sys.stderr)
        return 2
    from dashboard.server import LOOPBACK_HOSTS  # deferred: imports fastapi

    loopback = args.host in ("127.0.0.1", "localhost", "::1")
    # on loopback, also refuse other Host headers: a web page elsewhere cannot DNS-rebind to us
    app = create_app(runs, args.fits, refresh_s=args.refresh_s, allowed_hosts=LOOPBACK_HOSTS if loopback else None)
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        print(f"error: cannot bind {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    print(
        f"scalelab dashboard: http://{shown}:{port}/  (runs: {runs.resolve()}, "
        f"fits: {Path(args.fits).resolve() if args.fits else '-'})",
        flush=True,
    )
    if not loopback:
        print(f"warning: listening on {args.host}: anyone who can reach this port can read these runs", file=sys.stderr)
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
    return 0
