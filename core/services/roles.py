"""A Create* request's role must be one of the caller's account, as iam:PassRole requires on AWS."""

from __future__ import annotations

from sqlalchemy.orm import Session

from core.principal import Principal
from core.sagemaker.errors import ValidationException
from db.queries.role import account_has_role


def require_account_role(session: Session, *, principal: Principal, role_arn: str) -> None:
    """Raise SageMaker's ValidationException unless ``role_arn`` is a role registered to the caller.

    A role of another account is refused the same way as one that does not exist, so a
    caller learns nothing about other accounts' roles.
    """
    if not account_has_role(
        session, account_id=principal.account_id, aws_account_id=principal.aws_account_id, arn=role_arn
    ):
        raise ValidationException(
            f"Could not assume role {role_arn}. Please ensure that the role exists and allows "
            "principal 'sagemaker.amazonaws.com' to assume the role."
        )
