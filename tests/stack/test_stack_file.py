from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from stack.commands import serve_embedded_stack
from stack.embedded import EmbeddedStackOptions
from stack.stack_file import StackInfo, live_stack_pid, read_stack_file, stack_file_path, write_stack_file


def _info(state_dir: Path, pid: int) -> StackInfo:
    return StackInfo(
        api_url="http://127.0.0.1:8600",
        s3_endpoint_url="http://127.0.0.1:8601",
        region="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        state_dir=str(state_dir),
        database_url=f"sqlite:///{state_dir}/eaglenest.sqlite3",
        pid=pid,
        logs={},
    )


def test_the_stack_file_round_trips(tmp_path: Path) -> None:
    info = _info(tmp_path, 1234)
    write_stack_file(tmp_path, info)
    assert read_stack_file(tmp_path) == info
    assert not list(tmp_path.glob("*.tmp"))


def test_a_stack_file_of_a_dead_process_is_stale(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    write_stack_file(tmp_path, _info(tmp_path, dead.pid))
    assert live_stack_pid(tmp_path) is None
    assert live_stack_pid(tmp_path / "nowhere") is None


def test_up_refuses_a_state_dir_another_stack_serves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_stack_file(tmp_path, _info(tmp_path, os.getpid()))  # this test process stands in for it

    assert serve_embedded_stack(EmbeddedStackOptions(state_dir=tmp_path)) == 1

    assert f"already served by eaglenest up (pid {os.getpid()})" in capsys.readouterr().err
    assert stack_file_path(tmp_path).exists()  # the other stack's file is left alone


def test_up_names_a_taken_api_port_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        options = EmbeddedStackOptions(state_dir=tmp_path / "state", api_port=port, s3_port=0)
        assert serve_embedded_stack(options) == 1
    assert f"port {port} on 127.0.0.1 is not available (--port)" in capsys.readouterr().err
    assert not (tmp_path / "state").exists()  # nothing was started or created
