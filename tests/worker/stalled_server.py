"""An S3 endpoint that hangs: accepts connections and never answers (a real socket, no mock)."""

from __future__ import annotations

import socket
import threading


class StalledServer:
    """Accepts TCP connections and never answers: an S3 endpoint that hangs mid-request."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._connections: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self._connections.append(connection)

    def close(self) -> None:
        self._listener.close()
        for connection in self._connections:
            connection.close()
