"""Who a verified request acts for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    """The account (row id and 12-digit id), the access key, and the region the request signed for."""

    account_id: int
    aws_account_id: str
    access_key_id: str
    region: str
