"""The commands a GPU session runs, on a Python without the control plane's packages.

The GPU image (../shared/gpu/README.md) has torch and transformers but no SQLAlchemy, boto3 or
Celery, and ../shared/gpu/make-payload.sh does not bring them; tests/fixtures/gpu_image makes
this machine's Python look like it. `eaglenest base-heads ship` and `evaluate` must start
there (scripts/gpu-check.sh builds the shipped-head candidate with them), so `eaglenest` loads
only the module of the command it runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import SUBCOMMAND_REGISTRARS, build_parser, requested_command
from tests.fixtures.gpu_image_env import gpu_image_env

REPO_ROOT = Path(__file__).resolve().parents[2]


def on_the_gpu_image(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO_ROOT,
        env=gpu_image_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_gpu_image_fixture_hides_the_control_plane() -> None:
    done = on_the_gpu_image("-c", "import sqlalchemy")
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr
    probe = on_the_gpu_image("-c", "import importlib.util; print(importlib.util.find_spec('boto3'))")
    assert probe.stdout.strip() == "None"  # what libraries that probe for optional packages see


@pytest.mark.parametrize("subcommand", ["ship", "evaluate"])
def test_base_heads_ship_and_evaluate_start_without_the_control_plane(subcommand: str) -> None:
    done = on_the_gpu_image("-m", "cli.main", "base-heads", subcommand, "--help")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"usage: eaglenest base-heads {subcommand}" in done.stdout
    # The build itself imports too (the command imports it only once it runs).
    built = on_the_gpu_image("-c", "import worker.shipped_head_build, worker.shipped_head_eval")
    assert built.returncode == 0, built.stderr[-3000:]


def test_a_command_that_needs_the_control_plane_says_what_is_missing() -> None:
    done = on_the_gpu_image("-m", "cli.main", "migrate", "--help")
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["base-heads", "ship", "--minutes", "3"], "base-heads"),
        (["--log-level", "DEBUG", "up"], "up"),
        (["--log-level=DEBUG", "keys", "list"], "keys"),
        (["--help"], None),
        (["-h", "base-heads"], None),
        ([], None),
    ],
)
def test_the_command_word_is_found_before_parsing(argv: list[str], command: str | None) -> None:
    assert requested_command(argv) == command


@pytest.mark.parametrize("command", [name for names in SUBCOMMAND_REGISTRARS.values() for name in names])
def test_every_command_parses_with_its_own_module_alone(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser(command).parse_args([command, "--help"])
    assert exit_.value.code == 0
    assert f"usage: eaglenest {command}" in capsys.readouterr().out


def test_a_command_loads_no_other_commands_module_and_no_command_loads_them_all() -> None:
    with pytest.raises(SystemExit):
        build_parser("base-heads").parse_args(["keys", "list"])  # keys' module was not loaded
    assert build_parser().parse_args(["keys", "list"]).handler is not None
    assert build_parser("no-such-command").parse_args(["keys", "list"]).handler is not None
