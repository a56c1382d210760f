"""Errors the repository functions raise; the api maps them to AWS error codes."""

from __future__ import annotations


class NameAlreadyExistsError(Exception):
    """A resource with the same (case-insensitive) name already exists in the account."""

    def __init__(self, name: str) -> None:
        super().__init__(f"name {name!r} is already taken")
        self.name = name
