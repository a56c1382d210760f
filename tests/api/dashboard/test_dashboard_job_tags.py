"""The job page lists the job's tags: CreateOptimizationJob's, then AddTags/DeleteTags' changes."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

from tests.api.dashboard.dashboard_browser import requires_chromium, screenshot, sign_in
from tests.factories.accounts import AccountCredentials
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.fixtures.live_server import TEST_REGION, LiveServer

pytestmark = requires_chromium


def open_job_page(page: Page, server: LiveServer, account: AccountCredentials, name: str) -> None:
    sign_in(
        page,
        server.url,
        account.access_key_id,
        account.secret_access_key,
        TEST_REGION,
        route=f"#/jobs/{name}",
    )
    page.wait_for_selector("#job-status[data-status]")


def test_the_job_page_shows_the_jobs_tags(
    page: Page, live_server: LiveServer, account: AccountCredentials, sagemaker: Any
) -> None:
    body = create_optimization_job_request(Tags=[{"Key": "team", "Value": "ml"}])
    arn = sagemaker.create_optimization_job(**body)["OptimizationJobArn"]
    sagemaker.add_tags(ResourceArn=arn, Tags=[{"Key": "owner", "Value": "alice"}])
    open_job_page(page, live_server, account, body["OptimizationJobName"])
    assert page.locator("#job-tags li").all_inner_texts() == ["team=ml", "owner=alice"]
    screenshot(page, "job-tags")


def test_a_job_without_tags_shows_a_dash(
    page: Page, live_server: LiveServer, account: AccountCredentials, sagemaker: Any
) -> None:
    body = create_optimization_job_request(Tags=[{"Key": "team", "Value": "ml"}])
    arn = sagemaker.create_optimization_job(**body)["OptimizationJobArn"]
    sagemaker.delete_tags(ResourceArn=arn, TagKeys=["team"])
    open_job_page(page, live_server, account, body["OptimizationJobName"])
    assert page.inner_text("#job-tags") == "—"
