"""Shared test configuration: fixture modules live in tests/fixtures and are registered here."""

import os
import sys

from tests.fixtures.torch_threads import cores_per_test_process

if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    # Read by torch (in this process and every one a test starts) when it loads: the pytest
    # processes share the cores instead of each spinning threads on all of them.
    os.environ.setdefault("OMP_NUM_THREADS", str(cores_per_test_process()))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

pytest_plugins = [
    "tests.fixtures.client_stack",
    "tests.fixtures.database",
    "tests.fixtures.live_server",
    "tests.fixtures.models",
    "tests.fixtures.module_order",
    "tests.fixtures.seaweedfs",
    "tests.fixtures.termination",
    "tests.fixtures.torch_threads",
    "tests.fixtures.worker",
]
