"""Shared test configuration: fixture modules live in tests/fixtures and are registered here."""

import os
import sys

import pytest

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
    "tests.fixtures.seaweedfs",
    "tests.fixtures.termination",
    "tests.fixtures.torch_threads",
    "tests.fixtures.worker",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Modules with slow or end-to-end tests are collected first, each module's tests kept
    together and in order (``make pytest PYTEST_WORKERS=0`` runs them in this order).

    Under pytest-xdist (``make test``) its loadscope-reorder default then hands modules out by
    their number of tests, most first, so single-test modules (the demo, vLLM interop,
    gpu-check) run near the end. Keeping this order instead (``--no-loadscope-reorder``, longest
    modules first) was tried in session 32 and was worse on a 2-core VM: with every heavy e2e
    module at once the processes they start contended, 37 minutes in only 9 % of the tests had
    run and one had failed, against 29 minutes for the whole suite in xdist's order."""
    heavy = {_module(item) for item in items if _is_heavy(item)}
    items.sort(key=lambda item: 0 if _module(item) in heavy else 1)


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _is_heavy(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None or item.get_closest_marker("e2e") is not None
