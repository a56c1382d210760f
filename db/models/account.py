"""An AWS-style account: the owner of access keys and of every resource."""

from __future__ import annotations

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from db.base import Base, CreatedAtMixin, IdMixin

DEV_ACCOUNT_ID = "000000000000"


class Account(IdMixin, CreatedAtMixin, Base):
    __tablename__ = "accounts"

    # The 12-digit id that appears in ARNs; ``id`` is only the row key.
    aws_account_id: Mapped[str] = mapped_column(String(12), unique=True)
