"""`eaglenest client install-waiters`: the CLI gains our waiter and keeps SageMaker's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli.main import main
from client import install_waiters
from client.waiter_model import shipped_sagemaker_waiters

AWS_CLI = Path(sys.executable).with_name("aws")


def aws_wait_help(tmp_path: Path, data_path: Path) -> str:
    completed = subprocess.run(
        [str(AWS_CLI), "sagemaker", "wait", "help"],
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "AWS_DATA_PATH": str(data_path),
            "AWS_DEFAULT_REGION": "us-east-1",
            "PAGER": "cat",
            "MANPAGER": "cat",
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return completed.stdout


def test_cli_lists_our_waiter_and_the_shipped_ones_only_after_install(tmp_path: Path) -> None:
    data_path = tmp_path / "models"
    assert "optimization-job-completed-or-stopped" not in aws_wait_help(tmp_path, data_path)

    assert main(["client", "install-waiters", "--data-path", str(data_path)]) == 0

    listed = aws_wait_help(tmp_path, data_path)
    assert "optimization-job-completed-or-stopped" in listed
    for shipped in ("endpoint-in-service", "training-job-completed-or-stopped", "notebook-instance-stopped"):
        assert shipped in listed


def test_installed_file_is_shipped_waiters_plus_ours(tmp_path: Path) -> None:
    installed = install_waiters(tmp_path)
    api_version, shipped = shipped_sagemaker_waiters()
    assert installed.path == tmp_path / "sagemaker" / api_version / "waiters-2.json"
    document = json.loads(installed.path.read_text())
    assert document["version"] == 2
    assert set(document["waiters"]) == {*shipped["waiters"], "OptimizationJobCompletedOrStopped"}
    assert document["waiters"]["EndpointInService"] == shipped["waiters"]["EndpointInService"]
    ours = document["waiters"]["OptimizationJobCompletedOrStopped"]
    assert ours["operation"] == "DescribeOptimizationJob"
    assert {(a["state"], a["expected"]) for a in ours["acceptors"]} == {
        ("success", "COMPLETED"),
        ("success", "STOPPED"),
        ("failure", "FAILED"),
        ("failure", "ResourceNotFound"),
        ("failure", "ValidationException"),
    }


def test_reinstalling_keeps_a_users_own_waiters_and_refreshes_the_rest(tmp_path: Path) -> None:
    first = install_waiters(tmp_path)
    document = json.loads(first.path.read_text())
    document["waiters"]["MyWaiter"] = {**document["waiters"]["EndpointInService"], "delay": 7}
    document["waiters"]["EndpointInService"]["delay"] = 999  # a stale copy must not survive
    first.path.write_text(json.dumps(document))

    second = install_waiters(tmp_path)

    again = json.loads(second.path.read_text())
    assert second.kept == ["MyWaiter"]
    assert again["waiters"]["MyWaiter"]["delay"] == 7
    assert again["waiters"]["EndpointInService"]["delay"] != 999
    assert set(again["waiters"]) == {*first.waiters, "MyWaiter"}


def test_aws_data_path_decides_where_it_goes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DATA_PATH", os.pathsep.join([str(tmp_path / "first"), str(tmp_path / "second")]))
    installed = install_waiters()
    assert installed.path.is_relative_to(tmp_path / "first")


def test_a_file_that_is_not_a_waiter_model_is_named_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api_version, _ = shipped_sagemaker_waiters()
    target = tmp_path / "sagemaker" / api_version / "waiters-2.json"
    target.parent.mkdir(parents=True)
    target.write_text("not json")
    assert main(["client", "install-waiters", "--data-path", str(tmp_path)]) == 1
    assert f"{target} is not JSON" in capsys.readouterr().err
    assert target.read_text() == "not json"
