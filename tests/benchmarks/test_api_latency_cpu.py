"""benchmarks/api_latency.py's CPU accounting walks /proc while the server's threads come and go."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "api_latency.py"


@pytest.fixture(scope="module")
def api_latency() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_latency", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def _process(proc: Path, pid: int, utime: int, stime: int, tasks: dict[str, str | None]) -> None:
    """/proc/<pid>/stat and task/<tid>/children; a None children file is a thread that just ended."""
    (proc / str(pid)).mkdir(parents=True)
    fields = ["S", *["0"] * 10, str(utime), str(stime)]
    (proc / str(pid) / "stat").write_text(f"{pid} (py thon) {' '.join(fields)}\n")
    for tid, children in tasks.items():
        task = proc / str(pid) / "task" / tid
        task.mkdir(parents=True)
        if children is not None:
            (task / "children").write_text(children)


def test_vanishing_threads_and_children_are_skipped(api_latency: ModuleType, tmp_path: Path) -> None:
    ticks = os.sysconf("SC_CLK_TCK")
    _process(tmp_path, 100, ticks * 2, ticks, {"100": "200 300", "101": None})  # thread 101 ended
    _process(tmp_path, 200, ticks, 0, {"200": ""})
    # Child 300 was listed, then exited before its stat was read: no directory at all.

    assert api_latency.process_tree_cpu_seconds(100, proc=tmp_path) == pytest.approx(4.0)


def test_the_real_proc_of_this_process_is_read(api_latency: ModuleType) -> None:
    assert api_latency.process_tree_cpu_seconds(os.getpid()) > 0
