"""The job page's Stop and Delete buttons in a real browser: enabled only where the status allows.

Jobs are rows written straight to the database in each status, so no worker is needed; the
api behind the page is the live server.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, Route
from sqlalchemy.orm import Session, sessionmaker

from db.models.optimization_job_status import OptimizationJobStatus as Status
from tests.api.dashboard.dashboard_browser import requires_chromium, screenshot, sign_in
from tests.api.signed_http import rest_call
from tests.factories.accounts import AccountCredentials
from tests.factories.optimization_jobs import create_optimization_job
from tests.fixtures.live_server import TEST_REGION, LiveServer

pytestmark = requires_chromium

RUNNING = [Status.STARTING, Status.INPROGRESS, Status.STOPPING]
TERMINAL = [Status.COMPLETED, Status.FAILED, Status.STOPPED]


def create_job(factory: sessionmaker[Session], account: AccountCredentials, status: Status) -> str:
    with factory() as session:
        job = create_optimization_job(
            session, account_id=account.account_id, aws_account_id=account.aws_account_id, status=status
        )
        session.commit()
        return job.name


def open_job_page(page: Page, server: LiveServer, account: AccountCredentials, name: str) -> None:
    keys = (account.access_key_id, account.secret_access_key)
    sign_in(page, server.url, *keys, TEST_REGION, route=f"#/jobs/{name}")
    page.wait_for_selector("#job-status[data-status]")


def title(page: Page, selector: str) -> str:
    return page.get_attribute(selector, "title") or ""


@pytest.mark.parametrize("status", TERMINAL)
def test_stop_is_disabled_on_a_finished_job_and_says_why(
    page: Page,
    live_server: LiveServer,
    account: AccountCredentials,
    committed_session_factory: sessionmaker[Session],
    status: Status,
) -> None:
    name = create_job(committed_session_factory, account, status)
    open_job_page(page, live_server, account, name)
    assert page.is_disabled("#stop-job")
    assert title(page, "#stop-job") == (
        f"The job is {status}; only a STARTING or INPROGRESS job can be stopped."
    )
    assert page.is_enabled("#delete-job")
    assert page.get_attribute("#delete-job", "title") is None
    screenshot(page, f"job-actions-{status.lower()}")


@pytest.mark.parametrize("status", RUNNING)
def test_delete_is_disabled_on_a_running_job_and_says_why(
    page: Page,
    live_server: LiveServer,
    account: AccountCredentials,
    committed_session_factory: sessionmaker[Session],
    status: Status,
) -> None:
    name = create_job(committed_session_factory, account, status)
    open_job_page(page, live_server, account, name)
    assert page.is_disabled("#delete-job")
    assert title(page, "#delete-job") == (
        f"The job is {status}; stop it and delete it once it is COMPLETED, FAILED or STOPPED."
    )
    if status is Status.STOPPING:
        # Stopping again would be a no-op: the button says so instead.
        assert page.is_disabled("#stop-job")
        assert title(page, "#stop-job") == "The job is already stopping."
    else:
        assert page.is_enabled("#stop-job")
        assert page.get_attribute("#stop-job", "title") is None
    screenshot(page, f"job-actions-{status.lower()}")


def test_the_apis_error_still_shows_when_the_page_is_stale(
    page: Page,
    live_server: LiveServer,
    account: AccountCredentials,
    committed_session_factory: sessionmaker[Session],
) -> None:
    """A job deleted elsewhere while its page could not refresh: Delete shows the api's own error."""
    name = create_job(committed_session_factory, account, Status.COMPLETED)
    open_job_page(page, live_server, account, name)
    page.wait_for_selector("#delete-job:enabled")

    def refuse_reads(route: Route) -> None:
        if route.request.method == "GET":
            route.abort("connectionrefused")
        else:
            route.continue_()

    # The page keeps its last view (COMPLETED, Delete enabled) while its polls fail.
    page.route("**/optimization-jobs/**", refuse_reads)
    page.route("**/dashboard/api/jobs/**", refuse_reads)
    deleted = rest_call("DELETE", live_server.url, f"/v1/optimization-jobs/{name}", account)
    assert deleted.status_code == 200, deleted.text

    page.click("#delete-job")
    page.click("#confirm-delete")
    page.wait_for_selector("#action-message.error")
    assert page.inner_text("#action-message") == (
        f'ResourceNotFound: Could not find optimization job "{name}".'
    )
    assert page.is_enabled("#delete-job")  # the page still believes the job is COMPLETED
