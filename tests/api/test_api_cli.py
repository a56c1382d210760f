"""The real AWS CLI against the server, and the `eaglenest keys` / `migrate` commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from db.session import get_engine, get_session_factory
from db.settings import get_settings
from migrations.runner import upgrade_to_head
from stack.layout import StateLayout
from tests.factories.accounts import AccountCredentials
from tests.fixtures.live_server import AwsCli, LiveServer, sagemaker_client

EAGLENEST = Path(sys.executable).with_name("eaglenest")


def test_the_captured_cli_invocation_works(aws_cli: AwsCli, account: AccountCredentials) -> None:
    created = aws_cli(
        "create-optimization-job",
        "--optimization-job-name", "job1",
        "--role-arn", account.role_arn,
        "--model-source", '{"S3":{"S3Uri":"s3://bucket/base-model/","ModelAccessConfig":{"AcceptEula":true}}}',
        "--deployment-instance-type", "ml.p5.48xlarge",
        "--max-instance-count", "1",
        "--optimization-environment", "OPTION_TENSOR_PARALLEL_DEGREE=8",
        "--optimization-configs",
        '[{"ModelSpeculativeDecodingConfig":{"Technique":"EAGLE","TrainingDataSource":'
        '{"S3Uri":"s3://bucket/train/","S3DataType":"S3Prefix"}}}]',
        "--output-config", '{"S3OutputLocation":"s3://bucket/out/","SageMakerModel":{"ModelName":"opt-model"}}',
        "--stopping-condition", "MaxRuntimeInSeconds=36000",
        "--tags", "Key=team,Value=ml",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert created.json() == {
        "OptimizationJobArn": f"arn:aws:sagemaker:us-west-2:{account.aws_account_id}:optimization-job/job1"
    }
    described = aws_cli("describe-optimization-job", "--optimization-job-name", "job1").json()
    assert described["OptimizationJobStatus"] == "STARTING"
    assert described["OptimizationEnvironment"] == {"OPTION_TENSOR_PARALLEL_DEGREE": "8"}
    assert isinstance(described["CreationTime"], float), "CLI v1 prints the raw epoch seconds"


def test_cli_errors_exit_255_with_the_aws_message(aws_cli: AwsCli) -> None:
    missing = aws_cli("describe-optimization-job", "--optimization-job-name", "nope")
    assert missing.returncode == 255
    assert missing.stderr.strip() == (
        "An error occurred (ResourceNotFound) when calling the DescribeOptimizationJob operation: "
        'Could not find optimization job "nope".'
    )


@pytest.fixture
def cli_database(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point the process-wide settings and engine (what `eaglenest` uses) at the test database."""
    monkeypatch.setenv("EAGLENEST_DATABASE_URL", database_url)
    caches = (get_settings, get_engine, get_session_factory)
    for cache in caches:
        cache.cache_clear()
    yield database_url
    get_engine().dispose()
    for cache in caches:
        cache.cache_clear()


def test_keys_console_script_prints_a_working_pair(live_server: LiveServer, database_url: str) -> None:
    env = {**os.environ, "EAGLENEST_DATABASE_URL": database_url}
    created = subprocess.run(
        [str(EAGLENEST), "keys", "create", "--account-id", "111122223333", "--description", "ci"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    pair: dict[str, Any] = json.loads(created.stdout)["AccessKey"]
    assert pair["AccountId"] == "111122223333"
    credentials = AccountCredentials(0, "111122223333", pair["AccessKeyId"], pair["SecretAccessKey"])
    client = sagemaker_client(live_server, credentials, retries={"max_attempts": 1})
    assert client.list_models()["Models"] == []


def test_keys_list_and_delete(cli_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keys", "create", "--account-id", "222233334444", "--access-key-id", "AKIACLITEST"]) == 0
    capsys.readouterr()
    assert main(["keys", "list", "--account-id", "222233334444"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["AccessKeys"]
    assert entry["AccessKeyId"] == "AKIACLITEST"
    assert set(entry) == {"AccessKeyId", "AccountId", "Description", "CreateDate"}
    assert main(["keys", "create", "--account-id", "222233334444", "--access-key-id", "AKIACLITEST"]) == 1
    assert "already exists" in capsys.readouterr().err
    assert main(["keys", "delete", "AKIACLITEST"]) == 0
    assert main(["keys", "delete", "AKIACLITEST"]) == 1
    assert "no access key 'AKIACLITEST'" in capsys.readouterr().err
    assert main(["keys", "create", "--account-id", "12"]) == 2
    assert "12 digits" in capsys.readouterr().err


def test_migrate_is_idempotent(cli_database: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate"]) == 0
    assert "newest migration" in capsys.readouterr().out


def test_keys_reach_the_embedded_stack_through_its_state_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A database elsewhere is configured, but --state-dir names the stack to manage.
    monkeypatch.setenv("EAGLENEST_DATABASE_URL", "postgresql+psycopg://nobody@127.0.0.1:1/elsewhere")
    layout = StateLayout(tmp_path / "state")
    layout.root.mkdir()
    upgrade_to_head(layout.database_url)
    state = ["keys", "--state-dir", str(layout.root)]

    assert main([*state, "create", "--account-id", "333344445555", "--access-key-id", "AKIASTATEDIR"]) == 0
    assert json.loads(capsys.readouterr().out)["AccessKey"]["AccessKeyId"] == "AKIASTATEDIR"
    assert main([*state, "list"]) == 0
    listed = json.loads(capsys.readouterr().out)["AccessKeys"]
    assert [(key["AccessKeyId"], key["AccountId"]) for key in listed] == [("AKIASTATEDIR", "333344445555")]
    assert main([*state, "delete", "AKIASTATEDIR"]) == 0


def test_keys_without_a_database_say_which_one_they_tried_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EAGLENEST_DATABASE_URL", "postgresql+psycopg://admin:hunter2@127.0.0.1:1/absent")
    assert main(["keys", "list"]) == 1
    error = capsys.readouterr().err
    assert error.startswith(
        "error: cannot use the database postgresql+psycopg://admin:***@127.0.0.1:1/absent: "
    )
    assert "hunter2" not in error
    assert len(error.strip().splitlines()) == 1

    monkeypatch.delenv("EAGLENEST_DATABASE_URL")
    assert main(["keys", "--state-dir", str(tmp_path / "nowhere"), "list"]) == 1
    error = capsys.readouterr().err
    assert error.startswith(
        f"error: no embedded stack database at {tmp_path / 'nowhere' / 'eaglenest.sqlite3'}"
    )
    assert "Traceback" not in error


def test_keys_default_to_the_state_dir_here_unless_a_database_url_is_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Where `eaglenest up` was run without --state-dir: ./state holds the stack's database.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("EAGLENEST_DATABASE_URL", raising=False)
    layout = StateLayout(Path("state"))
    layout.root.mkdir()
    upgrade_to_head(layout.database_url)
    assert (
        main(["keys", "create", "--account-id", "444455556666", "--access-key-id", "AKIADEFAULTSTATE"]) == 0
    )
    capsys.readouterr()
    assert main(["keys", "list"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["AccessKeys"]
    assert entry["AccessKeyId"] == "AKIADEFAULTSTATE"

    # An explicit EAGLENEST_DATABASE_URL wins over the default state dir.
    monkeypatch.setenv("EAGLENEST_DATABASE_URL", "postgresql://127.0.0.1:1/none")
    assert main(["keys", "list"]) == 1
    assert capsys.readouterr().err.startswith(
        "error: cannot use the database postgresql://127.0.0.1:1/none: "
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://127.0.0.1:1/none", "postgresql://127.0.0.1:1/none"),
        # create_engine itself fails on these, before any connection is tried.
        ("mysql://admin:hunter2@127.0.0.1:1/none", "mysql://admin:***@127.0.0.1:1/none"),
        (
            "postgresql+psycopg://admin:hunter2@127.0.0.1:port/none",
            "postgresql+psycopg://***@127.0.0.1:port/none",
        ),
        ("not a database url", "not a database url"),
    ],
)
def test_keys_report_an_unusable_database_url_in_one_line(
    url: str, shown: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EAGLENEST_DATABASE_URL", url)
    assert main(["keys", "list"]) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"error: cannot use the database {shown}: ")
    assert len(error.strip().splitlines()) == 1
    assert "hunter2" not in error


def test_eaglenest_api_answers_to_the_address_it_binds(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[dict[str, Any]] = []
    monkeypatch.setattr("cli.serve.uvicorn.run", lambda app, **options: served.append(options))
    # The command sets EAGLENEST_API_HOST in os.environ; setting it here first makes
    # monkeypatch restore the original (usually unset) value afterwards.
    monkeypatch.setenv("EAGLENEST_API_HOST", "127.0.0.1")
    try:
        assert main(["api", "--host", "10.1.2.3", "--port", "8611"]) == 0
        assert served[0]["host"] == "10.1.2.3"
        assert "10.1.2.3" in get_settings().served_hostnames
    finally:
        get_settings.cache_clear()
