"""The endpoints page lists the account's endpoints with their status, instances and live numbers."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

from tests.api.dashboard.dashboard_browser import requires_chromium, screenshot, sign_in
from tests.factories.accounts import AccountCredentials
from tests.factories.endpoints import create_endpoint_config_request, production_variant
from tests.factories.sagemaker_models import create_model_request
from tests.fixtures.live_server import TEST_REGION, LiveServer

pytestmark = requires_chromium


def test_the_endpoints_page_shows_status_and_instances(
    page: Page, live_server: LiveServer, account: AccountCredentials, sagemaker: Any
) -> None:
    model = create_model_request()
    sagemaker.create_model(**model)
    config = create_endpoint_config_request(
        model["ModelName"],
        ProductionVariants=[production_variant(model["ModelName"], InitialInstanceCount=2)],
    )
    sagemaker.create_endpoint_config(**config)
    sagemaker.create_endpoint(EndpointName="page-endpoint", EndpointConfigName=config["EndpointConfigName"])
    sign_in(
        page,
        live_server.url,
        account.access_key_id,
        account.secret_access_key,
        TEST_REGION,
        route="#/endpoints",
    )
    row = page.locator("#endpoints-body tr[data-endpoint='page-endpoint']")
    row.wait_for()
    cells = row.locator("td")
    assert cells.nth(1).inner_text() == "Creating"
    assert cells.nth(2).inner_text() == config["EndpointConfigName"]
    assert cells.nth(3).inner_text().startswith("0 / 2")
    assert cells.nth(5).inner_text() == "—"  # no acceptance length without serving instances
    assert page.locator("header nav a.active").inner_text() == "Endpoints"
    screenshot(page, "endpoints")
