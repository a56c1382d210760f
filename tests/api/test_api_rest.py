"""The /v1 REST face (signed like the dashboard signs), /healthz, /metrics and the committed OpenAPI."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx
import yaml
from sqlalchemy.orm import Session, sessionmaker

from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import (
    get_optimization_job_by_name,
    record_job_progress,
    set_job_output,
    transition_optimization_job,
)
from tests.api.signed_http import rest_call
from tests.factories.accounts import AccountCredentials
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.factories.sagemaker_models import create_model_request
from tests.fixtures.live_server import TEST_REGION, LiveServer

OPENAPI_FILE = Path(__file__).resolve().parents[2] / "openapi.yaml"


def without_metadata(response: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in response.items() if key != "ResponseMetadata"}


def test_job_routes_match_the_aws_operations(
    live_server: LiveServer,
    account: AccountCredentials,
    sagemaker: Any,
    committed_session_factory: sessionmaker[Session],
) -> None:
    body = create_optimization_job_request(RoleArn=account.role_arn)
    name = body["OptimizationJobName"]
    created = rest_call("POST", live_server.url, "/v1/optimization-jobs", account, body)
    assert created.status_code == 200, created.text
    assert created.json() == {
        "OptimizationJobArn": sagemaker.describe_optimization_job(OptimizationJobName=name)[
            "OptimizationJobArn"
        ]
    }

    listed = rest_call(
        "GET", live_server.url, "/v1/optimization-jobs?MaxResults=10&SortOrder=Descending", account
    )
    boto_list = sagemaker.list_optimization_jobs(MaxResults=10, SortOrder="Descending")
    as_wire = [
        {
            **summary,
            "CreationTime": summary["CreationTime"].timestamp(),
            "LastModifiedTime": summary["LastModifiedTime"].timestamp(),
        }
        for summary in boto_list["OptimizationJobSummaries"]
    ]
    assert listed.json() == {"OptimizationJobSummaries": as_wire}

    with committed_session_factory() as session:
        job = get_optimization_job_by_name(
            session, account_id=account.account_id, region=TEST_REGION, name=name
        )
        assert job is not None
        transition_optimization_job(session, job=job, status=Status.INPROGRESS, message="picked up")
        record_job_progress(
            session, job=job, stage="train", percent=42.0, eta_seconds=120, message="step 42/100"
        )
        session.commit()

    detail = rest_call("GET", live_server.url, f"/v1/optimization-jobs/{name}", account).json()
    described = sagemaker.describe_optimization_job(OptimizationJobName=name)
    for member in (
        "OptimizationJobName",
        "OptimizationJobStatus",
        "ModelSource",
        "OutputConfig",
        "OptimizationConfigs",
    ):
        assert detail[member] == described[member]
    assert detail["Stage"] == "train"
    assert detail["ProgressPercent"] == 42.0
    assert 100 < detail["EtaSeconds"] <= 120
    assert detail["LastMessage"] == "step 42/100"
    assert [(e["Status"], e.get("Stage")) for e in detail["Events"]] == [
        ("STARTING", None), ("INPROGRESS", None), ("INPROGRESS", "train")
    ]  # fmt: skip
    assert detail["Tags"] == body["Tags"]
    assert "DeploymentRecommendation" not in detail  # only a benchmarked job has one

    recommendation = {"min_speedup": 1.03, "levels": [{"concurrency": 1, "configuration": "No EAGLE"}]}
    with committed_session_factory() as session:
        job = get_optimization_job_by_name(
            session, account_id=account.account_id, region=TEST_REGION, name=name
        )
        assert job is not None
        set_job_output(
            session,
            job=job,
            optimization_output={"RecommendedInferenceImage": "vllm/vllm-openai:latest"},
            deployment_recommendation=recommendation,
        )
        session.commit()
    detail = rest_call("GET", live_server.url, f"/v1/optimization-jobs/{name}", account).json()
    assert detail["DeploymentRecommendation"] == recommendation
    described = sagemaker.describe_optimization_job(OptimizationJobName=name)
    assert described["OptimizationOutput"] == {"RecommendedInferenceImage": "vllm/vllm-openai:latest"}

    assert rest_call("POST", live_server.url, f"/v1/optimization-jobs/{name}/stop", account).json() == {}
    conflict = rest_call("DELETE", live_server.url, f"/v1/optimization-jobs/{name}", account)
    assert (conflict.status_code, conflict.json()["__type"]) == (400, "ValidationException")


def test_model_routes(live_server: LiveServer, account: AccountCredentials) -> None:
    body = create_model_request(ExecutionRoleArn=account.role_arn, Tags=[{"Key": "k", "Value": "v"}])
    name = body["ModelName"]
    assert rest_call("POST", live_server.url, "/v1/models", account, body).status_code == 200
    detail = rest_call("GET", live_server.url, f"/v1/models/{name}", account).json()
    assert detail["PrimaryContainer"] == body["PrimaryContainer"]
    assert detail["Tags"] == [{"Key": "k", "Value": "v"}]
    listed = rest_call("GET", live_server.url, "/v1/models?NameContains=" + name[:8], account).json()
    assert [m["ModelName"] for m in listed["Models"]] == [name]
    assert rest_call("DELETE", live_server.url, f"/v1/models/{name}", account).json() == {}
    missing = rest_call("GET", live_server.url, f"/v1/models/{name}", account)
    assert missing.json()["__type"] == "ValidationException"
    assert missing.json()["message"].startswith('Could not find model "arn:aws:sagemaker:us-west-2:')


def test_rest_errors_use_the_aws_shape(live_server: LiveServer, account: AccountCredentials) -> None:
    bad_name = rest_call("GET", live_server.url, "/v1/optimization-jobs/bad_name", account)
    assert bad_name.status_code == 400
    assert bad_name.json() == {
        "__type": "ValidationException",
        "message": "1 validation error detected: Value 'bad_name' at 'optimizationJobName' failed to satisfy "
        "constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
    }
    not_int = rest_call("GET", live_server.url, "/v1/optimization-jobs?MaxResults=lots", account)
    assert not_int.status_code == 400
    assert not_int.json() == {  # what POST / answers to {"MaxResults": "lots"}
        "__type": "SerializationException",
        "message": "STRING_VALUE can not be converted to an Integer at 'maxResults'",
    }
    invalid = rest_call(
        "POST", live_server.url, "/v1/optimization-jobs", account, {"OptimizationJobName": "x"}
    )
    assert invalid.json()["__type"] == "ValidationException"
    assert invalid.json()["message"].startswith("6 validation errors detected: Value null at 'roleArn'")
    unsigned = httpx.get(f"{live_server.url}/v1/optimization-jobs")
    assert unsigned.json()["__type"] == "MissingAuthenticationTokenException"
    nowhere = rest_call("GET", live_server.url, "/v1/nowhere", account)
    assert (nowhere.status_code, nowhere.json()["__type"]) == (404, "UnknownOperationException")
    assert nowhere.headers["x-amzn-requestid"]


def test_health_and_metrics(live_server: LiveServer, account: AccountCredentials) -> None:
    assert httpx.get(f"{live_server.url}/healthz").json() == {"status": "ok"}
    rest_call("GET", live_server.url, "/v1/optimization-jobs/no-such-job", account)
    text = httpx.get(f"{live_server.url}/metrics").text
    assert (
        'eaglenest_api_requests_total{code="ResourceNotFound",operation="/v1/optimization-jobs/{name}"}'
        in text
    )
    assert 'eaglenest_api_request_duration_seconds_bucket{le="0.005",operation="/healthz"}' in text


def test_served_openapi_matches_the_committed_file(live_server: LiveServer) -> None:
    served = httpx.get(f"{live_server.url}/openapi.json").json()
    committed = yaml.safe_load(OPENAPI_FILE.read_text(encoding="utf-8"))
    assert served == committed, "openapi.yaml is stale: run `make openapi`"
    schemas = served["components"]["schemas"]
    name_schema = schemas["CreateOptimizationJobRequest"]["properties"]["OptimizationJobName"]
    assert name_schema["pattern"] == "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$"
    assert (name_schema["minLength"], name_schema["maxLength"]) == (1, 63)
    assert (
        "ml.p5.48xlarge"
        in schemas["CreateOptimizationJobRequest"]["properties"]["DeploymentInstanceType"]["enum"]
    )
    error_schemas = {name for name in schemas if name.endswith("Error")}
    assert {
        "ValidationExceptionError",
        "ResourceNotFoundError",
        "InvalidSignatureExceptionError",
    } <= error_schemas


class _AssetLinks(HTMLParser):
    """Every ``<script src>`` and ``<link href>`` of a page: what a browser fetches to show it."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        wanted = {"script": "src", "link": "href"}.get(tag)
        self.urls += [value for name, value in attrs if name == wanted and value]


def test_docs_pages_load_nothing_from_the_internet(live_server: LiveServer) -> None:
    """FastAPI's default /docs and /redoc pull Swagger UI and ReDoc from a CDN; none may."""
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        page = httpx.get(f"{live_server.url}{path}")
        if page.status_code == 404:
            continue
        assert page.status_code == 200, (path, page.status_code)
        links = _AssetLinks()
        links.feed(page.text)
        for url in links.urls:
            assert not urlsplit(url).netloc, f"{path} loads {url} from another host"
            asset = httpx.get(urljoin(f"{live_server.url}{path}", url))
            assert asset.status_code == 200, (path, url, asset.status_code)
    assert httpx.get(f"{live_server.url}/openapi.json").status_code == 200
