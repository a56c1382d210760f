"""ListOptimizationJobs filters, sort orders and NextToken pages, through boto3 paginators and the CLI."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from sqlalchemy.orm import Session, sessionmaker

from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import get_optimization_job_by_name, transition_optimization_job
from tests.factories.accounts import AccountCredentials
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.fixtures.live_server import TEST_REGION, AwsCli

NAMES = ["p-delta", "p-alpha", "q-echo", "p-charlie", "p-bravo"]


@pytest.fixture
def five_jobs(
    sagemaker: Any, account: AccountCredentials, committed_session_factory: sessionmaker[Session]
) -> list[str]:
    """Five jobs created in NAMES order; p-alpha has FAILED."""
    for name in NAMES:
        sagemaker.create_optimization_job(**create_optimization_job_request(OptimizationJobName=name))
    with committed_session_factory() as session:
        job = get_optimization_job_by_name(
            session, account_id=account.account_id, region=TEST_REGION, name="p-alpha"
        )
        assert job is not None
        transition_optimization_job(session, job=job, status=Status.FAILED, message="x", failure_reason="x")
        session.commit()
    return NAMES


def names(response: dict[str, Any]) -> list[str]:
    return [summary["OptimizationJobName"] for summary in response["OptimizationJobSummaries"]]


def test_paginator_walks_every_page_in_creation_order(sagemaker: Any, five_jobs: list[str]) -> None:
    pages = list(sagemaker.get_paginator("list_optimization_jobs").paginate(PaginationConfig={"PageSize": 2}))
    assert [len(page["OptimizationJobSummaries"]) for page in pages] == [2, 2, 1]
    assert [name for page in pages for name in names(page)] == five_jobs
    assert "NextToken" not in pages[-1]
    summary = pages[0]["OptimizationJobSummaries"][0]
    assert summary["OptimizationTypes"] == ["SpeculativeDecoding"]
    assert summary["DeploymentInstanceType"] == "ml.p5.48xlarge"
    assert summary["MaxInstanceCount"] == 1


def test_filters_and_sort_orders(sagemaker: Any, five_jobs: list[str]) -> None:
    assert names(sagemaker.list_optimization_jobs(SortBy="Name", SortOrder="Descending")) == sorted(
        five_jobs, reverse=True
    )
    assert names(sagemaker.list_optimization_jobs(NameContains="P-", SortBy="Name")) == [
        "p-alpha", "p-bravo", "p-charlie", "p-delta"
    ]  # fmt: skip
    assert names(sagemaker.list_optimization_jobs(StatusEquals="FAILED")) == ["p-alpha"]
    by_status = names(sagemaker.list_optimization_jobs(SortBy="Status"))
    assert by_status[0] == "p-alpha"
    assert names(sagemaker.list_optimization_jobs(OptimizationContains="Quantization")) == []
    assert len(names(sagemaker.list_optimization_jobs(OptimizationContains="SpeculativeDecoding"))) == 5
    all_jobs = sagemaker.list_optimization_jobs()["OptimizationJobSummaries"]
    third = all_jobs[2]["CreationTime"]
    after = names(sagemaker.list_optimization_jobs(CreationTimeAfter=third))
    assert after == five_jobs[3:]
    before = names(sagemaker.list_optimization_jobs(CreationTimeBefore=third, SortOrder="Descending"))
    assert before == five_jobs[:2][::-1]
    failed_at = next(j for j in all_jobs if j["OptimizationJobName"] == "p-alpha")["LastModifiedTime"]
    assert names(sagemaker.list_optimization_jobs(LastModifiedTimeAfter=all_jobs[-1]["CreationTime"])) == [
        "p-alpha"
    ]
    assert "p-alpha" not in names(sagemaker.list_optimization_jobs(LastModifiedTimeBefore=failed_at))


def test_bad_or_mismatched_tokens_are_refused(sagemaker: Any, five_jobs: list[str]) -> None:
    token = sagemaker.list_optimization_jobs(MaxResults=2)["NextToken"]
    with pytest.raises(ClientError) as raised:
        sagemaker.list_optimization_jobs(MaxResults=2, NextToken=token, SortBy="Name")
    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert "issued for a request with different filters" in raised.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as raised:
        sagemaker.list_optimization_jobs(NextToken="not-a-token!")
    assert raised.value.response["Error"] == {
        "Code": "ValidationException",
        "Message": "Invalid NextToken 'not-a-token!'.",
    }
    rest = sagemaker.list_optimization_jobs(MaxResults=2, NextToken=token)
    assert names(rest) == five_jobs[2:4]


def test_cli_auto_paginates_and_truncates(aws_cli: AwsCli, five_jobs: list[str]) -> None:
    merged = aws_cli("list-optimization-jobs", "--page-size", "2")
    assert merged.returncode == 0, merged.stderr
    assert names(merged.json()) == five_jobs

    truncated = aws_cli("list-optimization-jobs", "--max-items", "3", "--page-size", "2")
    assert names(truncated.json()) == five_jobs[:3]
    client_token = json.loads(base64.b64decode(truncated.json()["NextToken"]))
    assert client_token["boto_truncate_amount"] == 1

    resumed = aws_cli(
        "list-optimization-jobs", "--page-size", "2", "--starting-token", truncated.json()["NextToken"]
    )
    assert names(resumed.json()) == five_jobs[3:]

    one_page = aws_cli("list-optimization-jobs", "--no-paginate", "--max-results", "2")
    assert names(one_page.json()) == five_jobs[:2]
    assert one_page.json()["NextToken"]
