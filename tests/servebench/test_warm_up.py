"""What a server answers before the benchmark measures it: one short request on a CPU; on a
GPU, where the engine captures a CUDA graph per new step shape, the largest level's traffic
at once, so the captures happen before the first measured level rather than inside it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from servebench.servers import RunningServer
from servebench.warm_up import SHORT_TOKENS, warm_up, warm_up_requests

PROMPTS = ["first prompt", "second prompt", "third prompt"]


class _Recorder:
    def __init__(self, status: int) -> None:
        self.status = status
        self.bodies: list[dict[str, Any]] = []
        self.in_flight = 0
        self.most_at_once = 0
        self.lock = threading.Lock()


@pytest.fixture
def recorder() -> _Recorder:
    return _Recorder(status=200)


@pytest.fixture
def server(recorder: _Recorder, tmp_path: Path) -> Iterator[RunningServer]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with recorder.lock:
                recorder.bodies.append(body)
                recorder.in_flight += 1
                recorder.most_at_once = max(recorder.most_at_once, recorder.in_flight)
            time.sleep(0.2)  # long enough for requests sent at once to overlap
            with recorder.lock:
                recorder.in_flight -= 1
            self.send_response(recorder.status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"choices": [{"text": "hi"}]}')

        def log_message(self, *args: object) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    try:
        yield RunningServer(
            url=f"http://127.0.0.1:{http.server_address[1]}",
            served_model_name="smollm2",
            engine="eaglenest",
            log_path=tmp_path / "server.log",
            pid=0,
        )
    finally:
        http.shutdown()
        http.server_close()


def test_a_gpu_server_answers_the_largest_levels_traffic_at_once(
    server: RunningServer, recorder: _Recorder
) -> None:
    requests = warm_up_requests(PROMPTS, gpu=True, concurrency=[1, 2, 4, 8], max_tokens=128)
    warm_up(server, requests)

    assert len(recorder.bodies) == 8
    assert recorder.most_at_once == 8
    assert {body["max_tokens"] for body in recorder.bodies} == {128}
    # The benchmark's own prompts, every one of them while there are more rows than prompts.
    assert sorted(body["prompt"] for body in recorder.bodies) == sorted(PROMPTS * 2 + PROMPTS[:2])
    assert {body["model"] for body in recorder.bodies} == {"smollm2"}
    assert {body["temperature"] for body in recorder.bodies} == {0}


def test_a_cpu_server_answers_one_short_request(server: RunningServer, recorder: _Recorder) -> None:
    warm_up(server, warm_up_requests(PROMPTS, gpu=False, concurrency=[1, 2, 4, 8], max_tokens=128))

    assert [(body["prompt"], body["max_tokens"]) for body in recorder.bodies] == [(PROMPTS[0], SHORT_TOKENS)]


def test_a_failed_warm_up_request_is_an_error_naming_the_server(
    server: RunningServer, recorder: _Recorder
) -> None:
    recorder.status = 500
    with pytest.raises(RuntimeError, match=f"warm-up request to {server.url} failed: 500"):
        warm_up(server, warm_up_requests(PROMPTS, gpu=True, concurrency=[2], max_tokens=16))


def test_no_prompts_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one prompt"):
        warm_up_requests([], gpu=True, concurrency=[1], max_tokens=16)
