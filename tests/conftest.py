"""Shared test configuration: fixture modules live in tests/fixtures and are registered here."""

pytest_plugins = [
    "tests.fixtures.database",
    "tests.fixtures.live_server",
    "tests.fixtures.models",
    "tests.fixtures.seaweedfs",
    "tests.fixtures.worker",
]
