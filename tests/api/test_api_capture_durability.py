"""Captured traffic survives kill -9 of the api (issue 32): every invocation that got an answer is
stored exactly once, by the api that comes up after it.

A real api process serves an endpoint whose one instance is a stub model in this process. While
the test holds a lock on endpoint_captures the api cannot store anything, so the lines it
acknowledged exist only in its spool when it is killed; the restarted api stores them.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from db.arns import sagemaker_arn
from db.models.endpoint_capture import EndpointCapture
from db.models.endpoint_status import EndpointStatus
from db.queries.endpoint import change_endpoint, create_endpoint
from db.queries.endpoint_instance import IN_SERVICE, report_endpoint_instance
from db.settings import Settings
from tests.factories.accounts import AccountCredentials
from tests.factories.endpoints import create_endpoint_config_request, data_capture_config, unique_name
from tests.fixtures.api_process import launch_api_process
from tests.fixtures.live_server import TEST_REGION
from tests.fixtures.worker import settings_as_env

SessionFactory = sessionmaker[Session]


class StubModel(BaseHTTPRequestHandler):
    """An instance that answers every completion at once."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"choices": [{"text": " ok"}], "usage": {"completion_tokens": 1}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def stub_model() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StubModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def serving_endpoint(
    factory: SessionFactory, account: AccountCredentials, instance_url: str
) -> tuple[str, int]:
    """An InService endpoint capturing every request and answer, served by ``instance_url``."""
    name = unique_name("durable")
    spec = create_endpoint_config_request("m", DataCaptureConfig=data_capture_config("s3://captures/x/"))
    with factory() as session:
        endpoint = create_endpoint(
            session,
            account_id=account.account_id,
            name=name,
            region=TEST_REGION,
            arn=sagemaker_arn(
                region=TEST_REGION, aws_account_id=account.aws_account_id, resource_type="endpoint", name=name
            ),
            config_name=spec["EndpointConfigName"],
            config_spec=spec,
            deployment_config=None,
        )
        change_endpoint(
            session,
            endpoint=endpoint,
            from_statuses=[EndpointStatus.CREATING],
            values={"status": EndpointStatus.IN_SERVICE},
        )
        variant = spec["ProductionVariants"][0]["VariantName"]
        report_endpoint_instance(
            session,
            endpoint_id=endpoint.id,
            generation=0,
            variant_name=variant,
            ordinal=0,
            status=IN_SERVICE,
            url=instance_url,
        )
        session.commit()
        return name, endpoint.id


class Traffic(threading.Thread):
    """Invocations with distinct prompts until the api stops answering; keeps the answered ones."""

    def __init__(self, url: str, account: AccountCredentials, endpoint: str, prefix: str) -> None:
        super().__init__(daemon=True)
        self.runtime = boto3.client(
            "sagemaker-runtime",
            endpoint_url=url,
            region_name=TEST_REGION,
            aws_access_key_id=account.access_key_id,
            aws_secret_access_key=account.secret_access_key,
            config=Config(retries={"max_attempts": 1, "mode": "legacy"}, read_timeout=10),
        )
        self.endpoint = endpoint
        self.prefix = prefix
        self.answered: list[str] = []

    def run(self) -> None:
        for n in range(100_000):
            prompt = f"{self.prefix}-{n}"
            body = json.dumps({"inputs": prompt, "parameters": {"max_new_tokens": 1}})
            try:
                self.runtime.invoke_endpoint(
                    EndpointName=self.endpoint, Body=body, ContentType="application/json"
                )
            except Exception:
                return  # the api is gone
            self.answered.append(prompt)


def stored_prompts(factory: SessionFactory, endpoint_id: int) -> list[str]:
    with factory() as session:
        lines = session.scalars(
            select(EndpointCapture.line).where(EndpointCapture.endpoint_id == endpoint_id)
        )
        return [
            json.loads(json.loads(line)["captureData"]["endpointInput"]["data"])["inputs"] for line in lines
        ]


def test_a_killed_api_loses_no_answered_capture(
    database_url: str,
    committed_session_factory: SessionFactory,
    account: AccountCredentials,
    stub_model: str,
    tmp_path: Path,
) -> None:
    name, endpoint_id = serving_endpoint(committed_session_factory, account, stub_model)
    env = settings_as_env(Settings(database_url=database_url, state_dir=tmp_path / "state"))
    url, api = launch_api_process(env, tmp_path / "api.log")
    try:
        traffic = [Traffic(url, account, name, f"p{i}") for i in range(4)]
        for thread in traffic:
            thread.start()
        time.sleep(1.0)  # some lines are stored the ordinary way
        with committed_session_factory() as blocker:
            # From here on the api's inserts wait for this lock: what it answers stays in its spool.
            blocker.execute(text("LOCK TABLE endpoint_captures IN EXCLUSIVE MODE"))
            time.sleep(1.5)
            os.kill(api.pid, signal.SIGKILL)
            for thread in traffic:
                thread.join(timeout=30)
            answered = [prompt for thread in traffic for prompt in thread.answered]
            blocker.rollback()
    finally:
        api.stop()
    before_restart = stored_prompts(committed_session_factory, endpoint_id)
    assert len(answered) > len(before_restart) > 0, "the kill should leave answered lines only in the spool"

    _, restarted = launch_api_process(env, tmp_path / "api-restarted.log")
    try:
        deadline = time.monotonic() + 30
        while len(stored := stored_prompts(committed_session_factory, endpoint_id)) < len(answered):
            assert time.monotonic() < deadline, f"{len(stored)} of {len(answered)} answered lines stored"
            time.sleep(0.2)
    finally:
        restarted.stop()
    counts = collections.Counter(stored_prompts(committed_session_factory, endpoint_id))
    assert [prompt for prompt, count in counts.items() if count > 1] == []
    assert set(answered) <= set(counts)
    # Lines of requests that were cut off may be there too (spooled, then the answer was lost).
    assert len(counts) - len(answered) <= len(traffic)
    assert list((tmp_path / "state" / "capture-spool").rglob("*.jsonl")) == []
