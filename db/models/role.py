"""An IAM-style role of one account: the S3 identity its jobs read and write with.

SageMaker assumes a job's RoleArn and does every S3 request of the job with that role's
permissions. eaglenest has no STS, so a role stands for one S3 access key pair of the store
the workers use; the worker signs every S3 request of the job with it, never with the
service's own identity.
"""

from __future__ import annotations

from sqlalchemy import ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from db.base import Base, CreatedAtMixin, IdMixin
from db.models.account import Account


class Role(IdMixin, CreatedAtMixin, Base):
    __tablename__ = "roles"
    __table_args__ = (UniqueConstraint("account_id", "name"),)

    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"), index=True)
    # What follows ``role/`` in the ARN, path included (e.g. ``service-role/SageMaker``).
    name: Mapped[str] = mapped_column(String(512))
    s3_access_key_id: Mapped[str] = mapped_column(String(128))
    # Encrypted as access-key secrets are (db/secret_box.py): the worker must sign with it.
    s3_secret_ciphertext: Mapped[str] = mapped_column(Text)
    description: Mapped[str | None] = mapped_column(String(256))

    account: Mapped[Account] = relationship(lazy="raise")
