"""The free-port check before `eaglenest up` starts anything."""

from __future__ import annotations

import socket

import pytest

from stack.ports import require_free_port
from stack.readiness import StackStartError


def test_a_port_whose_server_just_died_is_free_again() -> None:
    # A server that closed its side of a connection first leaves it in TIME_WAIT on its
    # port for about a minute; a new server (SO_REUSEADDR, as uvicorn binds) can bind.
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        port = int(server.getsockname()[1])
        server.listen()
        with socket.create_connection(("127.0.0.1", port)) as client:
            accepted, _ = server.accept()
            accepted.close()  # the server closes first: its end goes to TIME_WAIT
            client.recv(1)
    with socket.socket() as plain, pytest.raises(OSError, match="Address already in use"):
        plain.bind(("127.0.0.1", port))  # what the check did before: it refused the port

    require_free_port("127.0.0.1", port, option="--port")


def test_a_port_something_listens_on_is_refused() -> None:
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = int(server.getsockname()[1])
        with pytest.raises(StackStartError, match=f"port {port} on 127.0.0.1 is not available \\(--port\\)"):
            require_free_port("127.0.0.1", port, option="--port")
