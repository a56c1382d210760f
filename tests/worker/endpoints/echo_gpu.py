"""A serving process that loads no model: its child prints the GPUs it sees, then waits or exits."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from tests.worker.endpoint_clients import wait_for
from worker.endpoints.model_files import ServedModel
from worker.endpoints.serving_process import ServingProcess

VISIBLE_PREFIX = "visible "


def unused_model(tmp_path: Path) -> ServedModel:
    """A model the echo child never opens."""
    return ServedModel(
        model_name="m", model_dir=tmp_path / "model", head_dir=None, num_speculative_tokens=None
    )


def child_script(*, exit_code: int | None) -> str:
    """Python that prints ``visible <CUDA_VISIBLE_DEVICES>``, then sleeps (None) or exits."""
    then = "time.sleep(120)" if exit_code is None else f"sys.exit({exit_code})"
    return (
        "import os, sys, time; "
        f"print({VISIBLE_PREFIX!r} + str(os.environ.get('CUDA_VISIBLE_DEVICES')), flush=True); {then}"
    )


class EchoGpuProcess(ServingProcess):
    def __init__(
        self,
        tmp_path: Path,
        name: str,
        *,
        device: str,
        exit_code: int | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(
            unused_model(tmp_path),
            threads=1,
            log_path=tmp_path / f"{name}.log",
            device=device,
            on_line=on_line,
        )
        self.exit_code_after_print = exit_code

    def argv(self) -> list[str]:
        return [sys.executable, "-c", child_script(exit_code=self.exit_code_after_print)]


def wait_for_child(condition: Callable[[], bool]) -> None:
    """An echo child only starts python and prints a line: poll often, give up after 30 s."""
    wait_for(condition, timeout=30.0, what="the echo child to print or exit", interval=0.05)
