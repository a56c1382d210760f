"""CloudWatch Logs (Logs_20140328) through boto3's logs client and the real AWS CLI."""

from __future__ import annotations

import os
import subprocess
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from sqlalchemy.orm import Session, sessionmaker

from core.services.log_writer import OPTIMIZATION_JOBS_GROUP, now_ms, write_log_events
from db.queries.log_event import NewLogEvent
from tests.factories.accounts import AccountCredentials, create_account
from tests.fixtures.live_server import AWS_CLI, TEST_REGION, LiveServer

ENDPOINT_GROUP = "/aws/sagemaker/Endpoints/ep1"


def logs_client(server: LiveServer, account: AccountCredentials, region: str = TEST_REGION) -> Any:
    return boto3.client(
        "logs",
        endpoint_url=server.url,
        region_name=region,
        aws_access_key_id=account.access_key_id,
        aws_secret_access_key=account.secret_access_key,
        config=Config(retries={"max_attempts": 1, "mode": "legacy"}),
    )


def write(
    factory: sessionmaker[Session],
    account: AccountCredentials,
    group: str,
    stream: str,
    lines: list[str],
    *,
    start: int,
) -> None:
    with factory() as session:
        write_log_events(
            session,
            account_id=account.account_id,
            region=TEST_REGION,
            group_name=group,
            stream_name=stream,
            events=[NewLogEvent(start + index, line) for index, line in enumerate(lines)],
            retention_in_days=30,
        )
        session.commit()


@pytest.fixture(scope="module")
def seeded(committed_session_factory: sessionmaker[Session]) -> tuple[AccountCredentials, int]:
    """One account with a job stream of 25 lines, two endpoint instance streams, and t0 (ms)."""
    with committed_session_factory() as session:
        account = create_account(session)
        session.commit()
    t0 = now_ms() - 60_000
    job_lines = [f"stage {index}: {'ERROR boom' if index % 10 == 3 else 'ok'}" for index in range(25)]
    factory = committed_session_factory
    write(factory, account, OPTIMIZATION_JOBS_GROUP, "job1", job_lines, start=t0)
    write(factory, account, ENDPOINT_GROUP, "AllTraffic/i-1", ["ready", "GET /ping"], start=t0)
    write(factory, account, ENDPOINT_GROUP, "AllTraffic/i-2", ["ready"], start=t0 + 5)
    return account, t0


def test_groups_and_streams_are_described_per_account_and_region(
    live_server: LiveServer, seeded: tuple[AccountCredentials, int], account: AccountCredentials
) -> None:
    owner, _ = seeded
    logs = logs_client(live_server, owner)
    groups = logs.describe_log_groups(logGroupNamePrefix="/aws/sagemaker/")["logGroups"]
    assert [group["logGroupName"] for group in groups] == [ENDPOINT_GROUP, OPTIMIZATION_JOBS_GROUP]
    assert (
        groups[1]["arn"]
        == f"arn:aws:logs:{TEST_REGION}:{owner.aws_account_id}:log-group:{OPTIMIZATION_JOBS_GROUP}:*"
    )
    assert groups[1]["retentionInDays"] == 30
    assert groups[1]["storedBytes"] > 0
    paged = [
        page["logGroups"][0]["logGroupName"]
        for page in logs.get_paginator("describe_log_groups").paginate(limit=1)
    ]
    assert paged == [ENDPOINT_GROUP, OPTIMIZATION_JOBS_GROUP]

    streams = logs.describe_log_streams(logGroupName=ENDPOINT_GROUP, orderBy="LastEventTime", descending=True)
    assert [stream["logStreamName"] for stream in streams["logStreams"]] == [
        "AllTraffic/i-2",
        "AllTraffic/i-1",
    ]
    assert streams["logStreams"][1]["lastEventTimestamp"] == seeded[1] + 1

    assert logs_client(live_server, account).describe_log_groups()["logGroups"] == []
    assert logs_client(live_server, owner, region="eu-west-1").describe_log_groups()["logGroups"] == []
    with pytest.raises(ClientError) as missing:
        logs_client(live_server, account).describe_log_streams(logGroupName=ENDPOINT_GROUP)
    assert missing.value.response["Error"] == {
        "Code": "ResourceNotFoundException",
        "Message": "The specified log group does not exist.",
    }


def test_get_log_events_pages_forward_and_backward(
    live_server: LiveServer, seeded: tuple[AccountCredentials, int]
) -> None:
    owner, t0 = seeded
    logs = logs_client(live_server, owner)
    head = logs.get_log_events(
        logGroupName=OPTIMIZATION_JOBS_GROUP, logStreamName="job1", startFromHead=True, limit=10
    )
    assert [event["timestamp"] - t0 for event in head["events"]] == list(range(10))
    after = logs.get_log_events(
        logGroupName=OPTIMIZATION_JOBS_GROUP,
        logStreamName="job1",
        nextToken=head["nextForwardToken"],
        limit=10,
    )
    assert after["events"][0]["message"] == "stage 10: ok"
    back = logs.get_log_events(
        logGroupName=OPTIMIZATION_JOBS_GROUP,
        logStreamName="job1",
        nextToken=after["nextBackwardToken"],
        limit=3,
    )
    assert [event["message"] for event in back["events"]] == ["stage 7: ok", "stage 8: ok", "stage 9: ok"]

    tail = logs.get_log_events(logGroupName=OPTIMIZATION_JOBS_GROUP, logStreamName="job1", limit=2)
    assert [event["message"] for event in tail["events"]] == ["stage 23: ERROR boom", "stage 24: ok"]
    end = logs.get_log_events(
        logGroupName=OPTIMIZATION_JOBS_GROUP, logStreamName="job1", nextToken=tail["nextForwardToken"]
    )
    assert end["events"] == []
    assert end["nextForwardToken"] == tail["nextForwardToken"]
    # How readers page a stream: follow nextForwardToken until it comes back unchanged.
    everything: list[str] = []
    request: dict[str, Any] = {"logGroupName": OPTIMIZATION_JOBS_GROUP, "logStreamName": "job1", "limit": 7}
    page = logs.get_log_events(**request, startFromHead=True)
    while page["events"]:
        everything += [event["message"] for event in page["events"]]
        page = logs.get_log_events(**request, nextToken=page["nextForwardToken"])
    assert len(everything) == 25


def test_filter_log_events_by_time_pattern_and_stream(
    live_server: LiveServer, seeded: tuple[AccountCredentials, int]
) -> None:
    owner, t0 = seeded
    logs = logs_client(live_server, owner)
    errors = logs.filter_log_events(logGroupName=OPTIMIZATION_JOBS_GROUP, filterPattern="ERROR")["events"]
    assert [event["message"] for event in errors] == [
        "stage 3: ERROR boom",
        "stage 13: ERROR boom",
        "stage 23: ERROR boom",
    ]
    assert errors[0]["logStreamName"] == "job1"
    assert errors[0]["eventId"]
    windowed = logs.filter_log_events(
        logGroupName=OPTIMIZATION_JOBS_GROUP,
        startTime=t0 + 5,
        endTime=t0 + 14,
        filterPattern='"ERROR boom" -ok',
    )["events"]
    assert [event["message"] for event in windowed] == ["stage 13: ERROR boom"]
    assert logs.filter_log_events(logGroupName=OPTIMIZATION_JOBS_GROUP, filterPattern="error")["events"] == []
    pages = list(
        logs.get_paginator("filter_log_events").paginate(logGroupName=OPTIMIZATION_JOBS_GROUP, limit=10)
    )
    # A page with events carries a token (a follower resumes from it); the empty one ends.
    assert [len(page["events"]) for page in pages] == [10, 10, 5, 0]
    assert "nextToken" not in pages[-1]
    prefixed = logs.filter_log_events(logGroupName=ENDPOINT_GROUP, logStreamNamePrefix="AllTraffic/i-2")
    assert [(event["logStreamName"], event["message"]) for event in prefixed["events"]] == [
        ("AllTraffic/i-2", "ready")
    ]
    # What ModelBuilder.deploy(wait=True) asks first, to see whether it may read the logs.
    assert logs.filter_log_events(logGroupName=ENDPOINT_GROUP, logStreamNamePrefix="AllTraffic/")["events"]


JOBS = OPTIMIZATION_JOBS_GROUP
BAD_NAME = (
    "1 validation error detected: Value 'bad name!' at 'logGroupName' failed to satisfy constraint: "
    "Member must satisfy regular expression pattern: ^[\\.\\-_/#A-Za-z0-9]+$"
)
NOT_FOUND = "The specified log group does not exist."
BAD_TOKEN = "The specified nextToken is invalid."
INVALID = "InvalidParameterException"


@pytest.mark.parametrize(
    ("call", "code", "message"),
    [
        ({"logGroupName": "/nope"}, "ResourceNotFoundException", NOT_FOUND),
        ({"logGroupName": "bad name!"}, "InvalidParameterException", BAD_NAME),
        ({"logGroupName": JOBS, "nextToken": "garbage"}, INVALID, BAD_TOKEN),
        ({"logGroupName": JOBS, "filterPattern": '{ $.level = "x" }'}, "InvalidParameterException", None),
        ({"logGroupName": JOBS, "logGroupIdentifier": JOBS}, "InvalidParameterException", None),
        ({"logGroupName": JOBS, "logStreamNames": ["job1"], "logStreamNamePrefix": "j"}, INVALID, None),
        # botocore checks only minimums; maximums reach the server.
        ({"logGroupName": JOBS, "limit": 10_001}, INVALID, None),
    ],
)  # fmt: skip
def test_bad_filter_requests_get_aws_error_codes(
    live_server: LiveServer,
    seeded: tuple[AccountCredentials, int],
    call: dict[str, Any],
    code: str,
    message: str | None,
) -> None:
    with pytest.raises(ClientError) as refused:
        logs_client(live_server, seeded[0]).filter_log_events(**call)
    assert refused.value.response["Error"]["Code"] == code
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    if message is not None:
        assert refused.value.response["Error"]["Message"] == message


def test_group_arns_address_only_the_callers_own_group(
    live_server: LiveServer, seeded: tuple[AccountCredentials, int]
) -> None:
    owner, _ = seeded
    logs = logs_client(live_server, owner)
    arn = f"arn:aws:logs:{TEST_REGION}:{owner.aws_account_id}:log-group:{ENDPOINT_GROUP}"
    assert len(logs.filter_log_events(logGroupIdentifier=arn)["events"]) == 3
    foreign = arn.replace(owner.aws_account_id, "999999999999")
    with pytest.raises(ClientError) as refused:
        logs.filter_log_events(logGroupIdentifier=foreign)
    assert refused.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_the_cli_reads_the_logs(
    live_server: LiveServer, seeded: tuple[AccountCredentials, int], tmp_path: Path
) -> None:
    owner, _ = seeded
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "AWS_ACCESS_KEY_ID": owner.access_key_id,
        "AWS_SECRET_ACCESS_KEY": owner.secret_access_key,
        "AWS_DEFAULT_REGION": TEST_REGION,
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
    }
    completed = subprocess.run(
        [
            str(AWS_CLI), "logs", "filter-log-events", "--log-group-name", OPTIMIZATION_JOBS_GROUP,
            "--filter-pattern", "ERROR", "--query", "events[].message", "--output", "text",
            "--endpoint-url", live_server.url,
        ],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split("\t")[0] == "stage 3: ERROR boom"


class StopFollowingError(Exception):
    """Ctrl-C, for the follow loop below."""


def tail_follow(logs: Any, group: str, start: int, sleep: Callable[[], None]) -> Iterator[dict[str, Any]]:
    """`aws logs tail GROUP --follow --since ...`: AWS CLI v2's follow loop, restated. It pages
    with nextToken; past the last page it sleeps, then asks again from the newest timestamp it
    saw and skips the events (by eventId) it already printed."""
    kwargs: dict[str, Any] = {"logGroupName": group, "interleaved": True, "startTime": start}
    seen: dict[int, set[str]] = defaultdict(set)
    while True:
        response = logs.filter_log_events(**kwargs)
        for event in response["events"]:
            if event["eventId"] not in seen[event["timestamp"]]:
                seen[event["timestamp"]].add(event["eventId"])
                yield event
        if seen:
            newest = max(seen)
            seen = defaultdict(set, {newest: seen[newest]})
        if "nextToken" in response:
            kwargs["nextToken"] = response["nextToken"]
        else:
            if seen:
                kwargs["startTime"] = max(seen)
            kwargs.pop("nextToken", None)
            sleep()


def test_tail_follow_shows_new_lines_once(
    live_server: LiveServer,
    seeded: tuple[AccountCredentials, int],
    committed_session_factory: sessionmaker[Session],
) -> None:
    owner, t0 = seeded
    group = "/aws/sagemaker/OptimizationJobs-follow"
    write(committed_session_factory, owner, group, "job2", ["[validate] ok", "[data] 3 records"], start=t0)
    arriving = [["[train] step 1 loss 2.0", "[train] step 2 loss 1.5"], ["ended COMPLETED"]]

    def sleep() -> None:  # while the CLI sleeps, the job goes on
        if not arriving:
            raise StopFollowingError
        write(committed_session_factory, owner, group, "job2", arriving.pop(0), start=now_ms())

    shown: list[str] = []
    events = tail_follow(logs_client(live_server, owner), group, t0, sleep)
    with pytest.raises(StopFollowingError):
        shown.extend(event["message"] for event in events)
    assert shown == [
        "[validate] ok",
        "[data] 3 records",
        "[train] step 1 loss 2.0",
        "[train] step 2 loss 1.5",
        "ended COMPLETED",
    ]


def test_a_reader_keeping_the_last_token_resumes_after_it(
    live_server: LiveServer,
    seeded: tuple[AccountCredentials, int],
    committed_session_factory: sessionmaker[Session],
) -> None:
    """ModelBuilder.deploy(wait=True)'s live logging keeps the last page's nextToken."""
    owner, t0 = seeded
    group = "/aws/sagemaker/Endpoints/follow"
    logs = logs_client(live_server, owner)
    write(committed_session_factory, owner, group, "AllTraffic/i-1", ["one", "two"], start=t0)
    first = logs.filter_log_events(logGroupName=group, logStreamNamePrefix="AllTraffic/")
    assert [event["message"] for event in first["events"]] == ["one", "two"]
    write(committed_session_factory, owner, group, "AllTraffic/i-1", ["three"], start=t0 + 1)
    resumed = logs.filter_log_events(logGroupName=group, nextToken=first["nextToken"])
    assert [event["message"] for event in resumed["events"]] == ["three"]
