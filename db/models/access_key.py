"""An access key pair that signs requests (SigV4) on behalf of one account."""

from __future__ import annotations

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from db.base import Base, CreatedAtMixin, IdMixin
from db.models.account import Account


class AccessKey(IdMixin, CreatedAtMixin, Base):
    __tablename__ = "access_keys"

    access_key_id: Mapped[str] = mapped_column(String(128), unique=True)
    # SigV4 is an HMAC keyed by the secret itself, so the server must be able to recover
    # it: a one-way hash cannot verify a signature. We store it encrypted with the
    # server's secret key (db/secret_box.py) so a database dump or backup alone does not
    # leak usable credentials.
    secret_ciphertext: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(String(256))
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)

    account: Mapped[Account] = relationship(lazy="raise")
