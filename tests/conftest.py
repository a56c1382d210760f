"""Shared test configuration: fixture modules live in tests/fixtures and are registered here."""

import os
import sys
from collections import Counter

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
    """The order modules are handed out in (``make test`` runs pytest-xdist with
    ``--no-loadscope-reorder``, so it keeps this one); each module's tests stay together and
    in order.

    1. ``long`` modules (the demo, the GPU check, vLLM interop, the base-head e2e: minutes
       each in one test) first. In xdist's own order (most tests first) they came last, so
       the run ended with one process on a several-minute test and the others idle. On one
       quiet 2-core EPYC, back to back from fresh clones (session 45): pytest 25 min 13 s in
       xdist's order, 21 min 1 s in this one, within 1.6 minutes of the per-process average.
    2. The rest by number of tests, most first, as xdist would; among equals, modules with
       slow or end-to-end tests first. Putting every heavy module first instead was tried in
       session 32 and was worse on a 2-core VM: with every heavy e2e module at once the
       processes they start contended, 37 minutes in only 9 % of the tests had run and one had
       failed, against 29 minutes for the whole suite in xdist's order."""
    counts = Counter(_module(item) for item in items)
    heavy = {_module(item) for item in items if _is_heavy(item)}
    long = {_module(item) for item in items if item.get_closest_marker("long") is not None}

    def rank(item: pytest.Item) -> tuple[bool, int, bool]:
        module = _module(item)
        return module not in long, -counts[module], module not in heavy

    items.sort(key=rank)  # stable: a module's tests keep their order


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _is_heavy(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None or item.get_closest_marker("e2e") is not None
