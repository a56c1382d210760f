"""The dashboard in a real browser against a live api, a real Celery worker and SeaweedFS.

One stack serves the module: one tiny job is watched from the jobs table until it is
COMPLETED (then its page must plot what the worker recorded and published), a longer one
is stopped from its page (Delete enabled only once it is STOPPED), and a second account's
job must never appear.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.exceptions import ClientError
from playwright.sync_api import Browser, Page
from sqlalchemy.orm import Session, sessionmaker

from client import eaglenest_client
from db.queries.account import delete_access_key
from db.queries.optimization_job import get_optimization_job_by_name
from db.queries.training_point import list_training_points
from tests.api.dashboard.dashboard_browser import requires_chromium, screenshot, sign_in
from tests.client.client_stack import ClientStack
from tests.factories.accounts import AccountCredentials, create_account
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.factories.sagemaker_models import create_model_request

pytestmark = [pytest.mark.slow, pytest.mark.e2e, requires_chromium]

# A limit for "eventually", not a speed target: in a full suite on a slow day (three pytest
# processes on two cores) the job was still INPROGRESS after 150 s.
JOB_TIMEOUT_SECONDS = 300


@dataclass(frozen=True)
class OtherAccount:
    credentials: AccountCredentials
    job_name: str

    def client(self, client_stack: ClientStack) -> Any:
        return eaglenest_client(
            client_stack.api_url,
            client_stack.region,
            (self.credentials.access_key_id, self.credentials.secret_access_key),
        )


@pytest.fixture(scope="module")
def other_account(client_stack: ClientStack, worker_session_factory: sessionmaker[Session]) -> OtherAccount:
    """A second account with one job of its own (its model prefix is empty: it fails at once)."""
    with worker_session_factory() as session:
        credentials = create_account(session)
        session.commit()
    other = OtherAccount(credentials=credentials, job_name=f"other-{uuid.uuid4().hex[:8]}")
    request = create_optimization_job_request(
        OptimizationJobName=other.job_name,
        RoleArn=credentials.role_arn,
        ModelSource={"S3": {"S3Uri": f"s3://{client_stack.bucket}/models/nothing-here/"}},
        OutputConfig={"S3OutputLocation": f"s3://{client_stack.bucket}/other/"},
    )
    request.pop("VpcConfig")
    other.client(client_stack).create_optimization_job(**request)
    return other


def sign_in_to(page: Page, client_stack: ClientStack, route: str = "") -> None:
    account = client_stack.account
    sign_in(
        page,
        client_stack.api_url,
        account.access_key_id,
        account.secret_access_key,
        client_stack.region,
        route=route,
    )


def row_status(page: Page, name: str) -> str | None:
    row = page.locator(f'tr[data-job="{name}"]')
    return row.get_attribute("data-status") if row.count() else None


@dataclass(frozen=True)
class WatchedJob:
    name: str
    statuses_seen: list[str]
    reloaded: bool
    page_text: str


@pytest.fixture(scope="module")
def watched_job(client_stack: ClientStack, other_account: OtherAccount, browser: Browser) -> WatchedJob:
    """Sign in, then create a job and watch its row change status until COMPLETED, by polling only."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        sign_in_to(page, client_stack)
        page.evaluate("window.__sameDocument = true")  # gone if the page reloads
        name = client_stack.create_job()
        statuses: list[str] = []
        deadline = time.monotonic() + JOB_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            status = row_status(page, name)
            if status is not None and (not statuses or statuses[-1] != status):
                statuses.append(status)
                screenshot(page, f"jobs-{status.lower()}")
            if status in ("COMPLETED", "FAILED", "STOPPED"):
                break
            time.sleep(0.2)
        return WatchedJob(
            name=name,
            statuses_seen=statuses,
            reloaded=not page.evaluate("window.__sameDocument === true"),
            page_text=page.inner_text("body"),
        )
    finally:
        context.close()


def test_sign_in_names_the_rejection_of_a_wrong_secret_or_an_unknown_key(
    page: Page, client_stack: ClientStack
) -> None:
    page.goto(f"{client_stack.api_url}/dashboard")
    page.fill("#access-key-id", client_stack.account.access_key_id)
    page.fill("#secret-access-key", "not-the-secret")
    page.click("#sign-in")
    page.wait_for_selector("#signin-error:has-text('InvalidSignatureException')")
    assert "The api rejected the key" in page.inner_text("#signin-error")
    page.fill("#access-key-id", "AKIDNOSUCHKEY000")
    page.click("#sign-in")
    page.wait_for_selector("#signin-error:has-text('UnrecognizedClientException')")
    screenshot(page, "sign-in-rejected")
    assert page.evaluate("sessionStorage.length") == 0  # nothing kept for a rejected key


def test_a_new_job_appears_and_its_status_changes_without_a_reload(watched_job: WatchedJob) -> None:
    assert watched_job.statuses_seen[-1] == "COMPLETED", watched_job.statuses_seen
    assert len(watched_job.statuses_seen) >= 2, watched_job.statuses_seen  # seen while still running
    assert set(watched_job.statuses_seen[:-1]) <= {"STARTING", "INPROGRESS"}
    assert not watched_job.reloaded


def test_the_session_keeps_no_secret(
    page: Page, client_stack: ClientStack, worker_session_factory: sessionmaker[Session]
) -> None:
    with worker_session_factory() as session:
        account = create_account(session)  # a real random secret (the dev key's is "test")
        session.commit()
    sign_in(page, client_stack.api_url, account.access_key_id, account.secret_access_key, client_stack.region)
    stored = page.evaluate("JSON.stringify(Object.assign({}, sessionStorage))")
    assert account.access_key_id in stored
    assert account.secret_access_key not in stored
    assert page.evaluate("localStorage.length") == 0


def test_the_job_page_plots_what_the_worker_recorded_and_published(
    page: Page,
    client_stack: ClientStack,
    watched_job: WatchedJob,
    worker_session_factory: sessionmaker[Session],
) -> None:
    sign_in_to(page, client_stack, route=f"#/jobs/{watched_job.name}")
    page.wait_for_selector("#job-status[data-status='COMPLETED']")
    page.wait_for_selector("#benchmark-table")
    screenshot(page, "job-completed")

    with worker_session_factory() as session:
        job = get_optimization_job_by_name(
            session,
            account_id=client_stack.account.account_id,
            region=client_stack.region,
            name=watched_job.name,
        )
        assert job is not None
        recorded = list_training_points(session, job_id=job.id, max_points=400)
    assert recorded, "the worker recorded no training steps"
    loss = page.locator("figure[data-chart='Training loss'] circle.point")
    assert loss.count() == len(recorded)
    positions = len(recorded[-1].step_accuracy)
    assert positions == 3  # EAGLE_NUM_SPECULATIVE_TOKENS
    acceptance = page.locator("figure[data-chart='Acceptance by draft position'] g.series")
    assert acceptance.count() == positions
    assert page.locator("figure[data-chart='Acceptance by draft position'] circle.point").count() == (
        positions * len(recorded)
    )

    output = job.output_config["S3OutputLocation"]
    bucket, _, prefix = output.removeprefix("s3://").partition("/")
    results = json.loads(
        client_stack.s3.get_object(Bucket=bucket, Key=f"{prefix}benchmark/results.json")["Body"].read()
    )
    configurations = {row["configuration"] for row in results["rows"]}
    for chart in ("Output throughput", "Time per output token"):
        series = page.locator(f"figure[data-chart='{chart}'] g.series")
        assert {series.nth(i).get_attribute("data-series") for i in range(series.count())} == configurations
        assert page.locator(f"figure[data-chart='{chart}'] circle.point").count() == len(results["rows"])
    assert page.locator("#benchmark-table tbody tr").count() == len(results["rows"])
    # The rows that measured fewer requests than sent, as results.json names them (often none).
    shortfalls = page.locator("#request-shortfalls li")
    shown_shortfalls = [shortfalls.nth(i).inner_text() for i in range(shortfalls.count())]
    assert shown_shortfalls == results["request_shortfalls"]
    # The deployment recommendation: one line per level, enabling EAGLE exactly where results.json does.
    levels = results["recommendation"]["levels"]
    shown = page.locator("#recommendation li")
    assert shown.count() == len(levels)
    for index, level in enumerate(levels):
        enabled = str(level["enable_speculative_decoding"]).lower()
        assert shown.nth(index).get_attribute("data-enable") == enabled
        assert shown.nth(index).inner_text().startswith(f"Concurrency {level['concurrency']}: ")
    header = page.inner_text("#benchmark-table thead")
    for column in (
        "TTFT (ms)",
        "TPOT (ms)",
        "ITL (ms)",
        "Output throughput (tokens/s)",
        "Acceptance length",
        "K",
        "Speedup vs No EAGLE",
    ):
        assert column in header

    links = page.locator("#artifacts a")
    hrefs = {links.nth(i).get_attribute("href") for i in range(links.count())}
    for relative in ("lineage.json", "eagle_model/model.safetensors", "benchmark/results.json"):
        assert f"{output}{relative}" in hrefs

    submitted = json.loads(page.inner_text("#job-request"))
    assert submitted["OptimizationJobName"] == watched_job.name
    assert submitted["ModelSource"] == {"S3": {"S3Uri": client_stack.model_uri}}
    history = page.inner_text("#job-events")
    assert "STARTING" in history
    assert "COMPLETED" in history
    # Each stage names the worker process that ran it, and its device.
    assert "(pid " in history
    assert ", cpu)" in history or ", cuda)" in history


def test_stop_from_the_job_page_reaches_stopped_and_only_then_allows_delete(
    page: Page, client_stack: ClientStack, watched_job: WatchedJob
) -> None:
    request = create_optimization_job_request(
        ModelSource={"S3": {"S3Uri": client_stack.model_uri}},
        OptimizationEnvironment={"EAGLE_TRAIN_MAX_MINUTES": "5", "EAGLE_NUM_SPECULATIVE_TOKENS": "3"},
        OptimizationConfigs=[
            {
                "ModelSpeculativeDecodingConfig": {
                    "Technique": "EAGLE",
                    "TrainingDataSource": {"S3Uri": client_stack.data_uri, "S3DataType": "S3Prefix"},
                }
            }
        ],
        OutputConfig={"S3OutputLocation": f"s3://{client_stack.bucket}/stopped/"},
    )
    request.pop("VpcConfig")
    name = request["OptimizationJobName"]
    client_stack.client().create_optimization_job(**request)
    sign_in_to(page, client_stack, route=f"#/jobs/{name}")
    page.wait_for_selector("#job-status[data-status='INPROGRESS']", timeout=60_000)

    # The page greys Delete out while the job runs; the api still refuses it when called.
    assert page.is_disabled("#delete-job")
    assert "INPROGRESS" in (page.get_attribute("#delete-job", "title") or "")
    with pytest.raises(ClientError) as refused:
        client_stack.client().delete_optimization_job(OptimizationJobName=name)
    assert f'Cannot delete optimization job "{name}" in status INPROGRESS' in str(refused.value)

    page.click("#stop-job")
    page.wait_for_selector("#job-status[data-status='STOPPED']", timeout=60_000)
    screenshot(page, "job-stopped")
    assert page.is_disabled("#stop-job")
    assert (
        client_stack.client().describe_optimization_job(OptimizationJobName=name)["OptimizationJobStatus"]
        == "STOPPED"
    )

    page.click("#delete-job")
    page.click("#confirm-delete")
    page.wait_for_selector("#jobs-table")
    page.wait_for_selector(f'tr[data-job="{watched_job.name}"]')
    assert page.locator(f'tr[data-job="{name}"]').count() == 0


def test_another_accounts_jobs_and_models_never_show(
    page: Page, client_stack: ClientStack, other_account: OtherAccount, watched_job: WatchedJob
) -> None:
    client_stack.client().create_model(**create_model_request(ModelName=f"dash-{uuid.uuid4().hex[:8]}"))
    assert other_account.job_name not in watched_job.page_text

    other = other_account.credentials
    sign_in(page, client_stack.api_url, other.access_key_id, other.secret_access_key, client_stack.region)
    page.wait_for_selector(f'tr[data-job="{other_account.job_name}"]')
    names = page.locator("#jobs-body tr")
    assert [names.nth(i).get_attribute("data-job") for i in range(names.count())] == [other_account.job_name]
    screenshot(page, "other-account-jobs")

    page.goto(f"{client_stack.api_url}/dashboard#/jobs/{watched_job.name}")
    page.wait_for_selector(f"#job-summary:has-text('No optimization job named {watched_job.name}')")

    page.goto(f"{client_stack.api_url}/dashboard#/models")
    page.wait_for_selector("#models-state:has-text('No models registered')")
    assert page.locator("#models-body tr").count() == 0


def test_the_models_page_shows_data_sources_and_the_eagle_model_channel(
    page: Page, client_stack: ClientStack
) -> None:
    request = create_model_request(ModelName=f"dash-{uuid.uuid4().hex[:8]}")
    client_stack.client().create_model(**request)
    sign_in_to(page, client_stack, route="#/models")
    row = page.locator(f'tr[data-model="{request["ModelName"]}"]')
    row.wait_for()
    text = row.inner_text()
    assert "s3://models/llama/" in text
    channel = row.locator("li[data-channel='eagle_model']")
    assert "s3://models/llama-eagle3/" in channel.inner_text()
    assert "EAGLE head" in channel.inner_text()
    screenshot(page, "models")


def test_api_down_and_rejected_signatures_are_shown_and_cleared(
    page: Page, client_stack: ClientStack, worker_session_factory: sessionmaker[Session]
) -> None:
    sign_in_to(page, client_stack)
    page.route("**/dashboard/api/**", lambda route: route.abort("connectionrefused"))
    page.wait_for_selector("#banner[data-kind='network']:has-text('API unreachable')")
    screenshot(page, "api-down")
    page.unroute("**/dashboard/api/**")
    page.wait_for_selector("#banner", state="hidden")

    # A key deleted while its dashboard is open: the next polls are refused, and it says so.
    with worker_session_factory() as session:
        doomed = create_account(session)
        session.commit()
    page.click("#sign-out")
    sign_in(page, client_stack.api_url, doomed.access_key_id, doomed.secret_access_key, client_stack.region)
    with worker_session_factory() as session:
        assert delete_access_key(session, access_key_id=doomed.access_key_id)
        session.commit()
    page.wait_for_selector(
        "#banner[data-kind='auth']:has-text('UnrecognizedClientException')", timeout=20_000
    )
    screenshot(page, "signature-rejected")
    page.click("#banner button")
    page.wait_for_selector("#access-key-id")
