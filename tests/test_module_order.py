"""tests/fixtures/module_order.py: pytest-xdist starts the longest modules first."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.module_order import MODULE_SECONDS_FILE, load_module_seconds, module_rank

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_heavy_modules_come_first_and_each_group_runs_longest_first() -> None:
    seconds = {"heavy_long.py": 400.0, "heavy_short.py": 30.0, "light_long.py": 900.0}
    modules = {
        "light_unknown.py": False,
        "light_long.py": False,
        "heavy_unknown.py": True,
        "heavy_short.py": True,
        "heavy_long.py": True,
    }
    ordered = sorted(modules, key=lambda module: module_rank(module, heavy=modules[module], seconds=seconds))
    assert ordered == [
        *("heavy_long.py", "heavy_short.py", "heavy_unknown.py"),
        *("light_long.py", "light_unknown.py"),
    ]


def test_xdist_keeps_the_order_instead_of_sorting_modules_by_test_count(pytestconfig: pytest.Config) -> None:
    # Its default sorts modules by their number of tests, which ran the single-test demo last.
    assert pytestconfig.getoption("loadscopereorder") is False


def test_the_committed_measurement_names_modules_that_exist() -> None:
    seconds = load_module_seconds(MODULE_SECONDS_FILE)
    assert seconds, "tests/module_seconds.json is missing or empty"
    assert "tests/demo/test_demo_script.py" in seconds
    stale = [module for module in seconds if not (REPO_ROOT / module).is_file()]
    assert not stale, f"tests/module_seconds.json names modules that are gone: {stale}"


def test_a_recorded_run_orders_the_next_one(tmp_path: Path) -> None:
    (tmp_path / "test_a.py").write_text("import time\n\ndef test_a():\n    pass\n")
    (tmp_path / "test_b.py").write_text("import time\n\ndef test_b():\n    time.sleep(0.3)\n")
    (tmp_path / "test_c.py").write_text("import pytest\n\n@pytest.mark.slow\ndef test_c():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n    e2e: e2e\n")
    recorded = tmp_path / "seconds.json"

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "tests.fixtures.module_order", *args],
            cwd=tmp_path,
            # No other plugin: the run sees this one alone (and starts in a second, not ten).
            env={
                "PYTHONPATH": str(REPO_ROOT),
                "PATH": "/usr/bin:/bin",
                "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            },
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    run("-q", f"--module-seconds={tmp_path / 'none.json'}", f"--record-module-seconds={recorded}")
    seconds = json.loads(recorded.read_text())["seconds"]
    assert set(seconds) == {"test_a.py", "test_b.py", "test_c.py"}
    assert seconds["test_b.py"] >= 0.3 > seconds["test_a.py"]

    listed = run("--collect-only", "-q", f"--module-seconds={recorded}")
    order = [line.split("::")[0] for line in listed.splitlines() if "::" in line]
    # The slow-marked module first, then the one the record measured longest.
    assert order == ["test_c.py", "test_b.py", "test_a.py"]
