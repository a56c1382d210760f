"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import socket
from contextlib import ExitStack

from stack.readiness import StackStartError


def free_ports(count: int, *, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct ports that were free a moment ago.

    All sockets stay bound until every port is chosen, so the same port is never returned
    twice; another process can still take one before the caller binds it.
    """
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def free_port(*, host: str = "127.0.0.1") -> int:
    return free_ports(1, host=host)[0]


def require_free_port(host: str, port: int, *, option: str) -> None:
    """Raise StackStartError naming the command-line ``option`` when ``host:port`` is taken.

    The probe binds with SO_REUSEADDR, as the servers themselves do (uvicorn, SeaweedFS):
    connections of a server that just died linger in TIME_WAIT for about a minute, and
    would make a plain bind fail although the server can bind. A port something listens
    on still fails the probe.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise StackStartError(
                f"port {port} on {host} is not available ({option}): {error.strerror}"
            ) from error
