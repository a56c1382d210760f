"""Shared test configuration: fixture modules live in tests/fixtures and are registered here."""

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
