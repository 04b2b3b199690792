"""A free TCP port, for the rendezvous of a process group started on this host (the trainer's default
MASTER_PORT, tests and benchmarks that launch ranks side by side)."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now. The OS picks it; another process may take it before the caller
    binds it, which is why callers pick one per launch rather than a fixed number."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
