"""The dashboard's signed JSON routes and its static files, against the live server (no browser)."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from db.models.optimization_job_status import OptimizationJobStatus as Status
from db.queries.optimization_job import (
    get_optimization_job_by_name,
    record_job_progress,
    transition_optimization_job,
)
from db.queries.training_point import NewTrainingPoint, add_training_points
from tests.api.signed_http import call_operation, rest_call
from tests.factories.accounts import AccountCredentials, create_account
from tests.factories.endpoints import create_endpoint_config_request
from tests.factories.optimization_jobs import create_optimization_job_request
from tests.factories.sagemaker_models import create_model_request
from tests.fixtures.live_server import TEST_REGION, LiveServer


def create_job(server: LiveServer, account: AccountCredentials, name: str) -> None:
    body = create_optimization_job_request(OptimizationJobName=name, RoleArn=account.role_arn)
    created = rest_call("POST", server.url, "/v1/optimization-jobs", account, body)
    assert created.status_code == 200, created.text


def get(server: LiveServer, account: AccountCredentials, path: str) -> httpx.Response:
    return rest_call("GET", server.url, path, account)


def start_training(factory: sessionmaker[Session], account: AccountCredentials, name: str) -> None:
    """What the worker writes while a job trains: INPROGRESS, progress, two training steps."""
    with factory() as session:
        job = get_optimization_job_by_name(
            session, account_id=account.account_id, region=TEST_REGION, name=name, for_update=True
        )
        assert job is not None
        transition_optimization_job(session, job=job, status=Status.INPROGRESS, message="picked up")
        record_job_progress(
            session, job=job, stage="train", percent=42.0, eta_seconds=90.0, message="training: step 2/10"
        )
        add_training_points(
            session,
            job_id=job.id,
            points=[
                NewTrainingPoint(
                    step=1, total_steps=10, elapsed_seconds=0.5, loss=3.0, step_accuracy=[0.1, 0.0]
                ),
                NewTrainingPoint(
                    step=2, total_steps=10, elapsed_seconds=1.0, loss=2.5, step_accuracy=[0.3, 0.1]
                ),
            ],
        )
        session.commit()


def names(body: dict[str, Any]) -> list[str]:
    return [job["OptimizationJobName"] for job in body["Jobs"]]


def test_the_jobs_table_has_progress_inputs_and_only_the_callers_jobs(
    live_server: LiveServer, account: AccountCredentials, committed_session_factory: sessionmaker[Session]
) -> None:
    with committed_session_factory() as session:
        other = create_account(session)
        session.commit()
    create_job(live_server, account, "dash-alpha")
    create_job(live_server, account, "dash-beta")
    create_job(live_server, other, "dash-alpha")  # same name, other account
    start_training(committed_session_factory, account, "dash-beta")

    listed = get(live_server, account, "/dashboard/api/jobs?SortBy=Name&SortOrder=Ascending")
    assert listed.status_code == 200, listed.text
    assert names(listed.json()) == ["dash-alpha", "dash-beta"]
    beta = listed.json()["Jobs"][1]
    assert beta["OptimizationJobStatus"] == "INPROGRESS"
    assert beta["Stage"] == "train"
    assert beta["ProgressPercent"] == 42.0
    assert 0 < beta["EtaSeconds"] <= 90
    assert beta["LastMessage"] == "training: step 2/10"
    assert beta["Model"] == "s3://models/llama/"
    assert beta["Technique"] == "EAGLE"
    assert isinstance(beta["OptimizationStartTime"], float)
    assert (
        get(live_server, other, "/dashboard/api/jobs").json()["Jobs"][0]["OptimizationJobArn"]
        != (listed.json()["Jobs"][0]["OptimizationJobArn"])
    )
    assert names(get(live_server, other, "/dashboard/api/jobs").json()) == ["dash-alpha"]


def test_filters_sort_and_pages_follow_list_optimization_jobs(
    live_server: LiveServer, account: AccountCredentials, committed_session_factory: sessionmaker[Session]
) -> None:
    for name in ("page-a", "page-b", "page-c"):
        create_job(live_server, account, name)
    start_training(committed_session_factory, account, "page-b")

    running = get(live_server, account, "/dashboard/api/jobs?StatusEquals=INPROGRESS").json()
    assert names(running) == ["page-b"]
    assert names(get(live_server, account, "/dashboard/api/jobs?NameContains=GE-C").json()) == ["page-c"]

    first = get(
        live_server, account, "/dashboard/api/jobs?MaxResults=2&SortBy=Name&SortOrder=Descending"
    ).json()
    assert names(first) == ["page-c", "page-b"]
    token = first["NextToken"]
    second = get(
        live_server,
        account,
        f"/dashboard/api/jobs?MaxResults=2&SortBy=Name&SortOrder=Descending&NextToken={token}",
    ).json()
    assert names(second) == ["page-a"]
    assert "NextToken" not in second

    bad = get(live_server, account, "/dashboard/api/jobs?StatusEquals=RUNNING")
    assert bad.status_code == 400
    assert bad.json()["__type"] == "ValidationException"
    assert "RUNNING" in bad.json()["message"]


def test_the_training_curve_and_results_are_per_account(
    live_server: LiveServer, account: AccountCredentials, committed_session_factory: sessionmaker[Session]
) -> None:
    with committed_session_factory() as session:
        other = create_account(session)
        session.commit()
    create_job(live_server, account, "curve-job")
    start_training(committed_session_factory, account, "curve-job")

    curve = get(live_server, account, "/dashboard/api/jobs/curve-job/training")
    assert curve.status_code == 200, curve.text
    assert curve.json()["Points"] == [
        {"Step": 1, "TotalSteps": 10, "ElapsedSeconds": 0.5, "Loss": 3.0, "StepAccuracy": [0.1, 0.0]},
        {"Step": 2, "TotalSteps": 10, "ElapsedSeconds": 1.0, "Loss": 2.5, "StepAccuracy": [0.3, 0.1]},
    ]
    results = get(live_server, account, "/dashboard/api/jobs/curve-job/results").json()
    assert results["Available"] is False
    assert results["Reason"] == "the job is INPROGRESS; results are published when it is COMPLETED"
    assert results["LineageUri"] == "s3://out/jobs/lineage.json"

    for path in ("/dashboard/api/jobs/curve-job/training", "/dashboard/api/jobs/curve-job/results"):
        hidden = get(live_server, other, path)
        assert hidden.status_code == 400
        assert hidden.json()["__type"] == "ResourceNotFound"


def test_models_are_described_with_their_channels(
    live_server: LiveServer, account: AccountCredentials
) -> None:
    body = create_model_request(ModelName="dash-model", ExecutionRoleArn=account.role_arn)
    assert rest_call("POST", live_server.url, "/v1/models", account, body).status_code == 200
    models = get(live_server, account, "/dashboard/api/models").json()["Models"]
    assert [model["ModelName"] for model in models] == ["dash-model"]
    (channel,) = models[0]["PrimaryContainer"]["AdditionalModelDataSources"]
    assert channel["ChannelName"] == "eagle_model"
    assert channel["S3DataSource"]["S3Uri"] == "s3://models/llama-eagle3/"


def test_endpoints_are_listed_with_their_instances_and_only_the_callers(
    live_server: LiveServer, account: AccountCredentials, committed_session_factory: sessionmaker[Session]
) -> None:
    model = create_model_request(ModelName="dash-endpoint-model", ExecutionRoleArn=account.role_arn)
    assert rest_call("POST", live_server.url, "/v1/models", account, model).status_code == 200
    config = create_endpoint_config_request("dash-endpoint-model")
    for operation, body in (
        ("CreateEndpointConfig", config),
        ("CreateEndpoint", {"EndpointName": "dash-ep", "EndpointConfigName": config["EndpointConfigName"]}),
    ):
        assert call_operation(live_server.url, account, operation, body).status_code == 200
    (entry,) = get(live_server, account, "/dashboard/api/endpoints").json()["Endpoints"]
    assert entry["Endpoint"]["EndpointName"] == "dash-ep"
    assert entry["Endpoint"]["EndpointStatus"] == "Creating"
    assert entry["Instances"] == []
    assert entry["Live"] == {"InstancesAnswering": 0, "RequestsRunning": 0.0, "GeneratedTokens": 0.0}
    with committed_session_factory() as session:
        other = create_account(session)
        session.commit()
    assert get(live_server, other, "/dashboard/api/endpoints").json()["Endpoints"] == []


def test_data_routes_need_a_signature_and_the_page_does_not(live_server: LiveServer) -> None:
    paths = (
        "/dashboard/api/jobs",
        "/dashboard/api/models",
        "/dashboard/api/endpoints",
        "/dashboard/api/jobs/x/training",
    )
    for path in paths:
        unsigned = httpx.get(f"{live_server.url}{path}")
        assert unsigned.status_code in (400, 403)
        assert unsigned.json()["__type"] == "MissingAuthenticationTokenException"
    page = httpx.get(f"{live_server.url}/dashboard")
    assert page.status_code == 200
    assert '<script type="module" src="/dashboard/static/js/app.js">' in page.text
    script = httpx.get(f"{live_server.url}/dashboard/static/js/sigv4.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert httpx.get(f"{live_server.url}/dashboard/static/js/../../pages.py").status_code == 404
