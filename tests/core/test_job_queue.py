"""enqueue_optimization_job / request_stop against the real Redis broker (no worker running)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from core.job_queue import enqueue_optimization_job, request_stop
from core.task_names import RUN_OPTIMIZATION_JOB
from db.settings import Settings, get_settings
from tests.fixtures.worker import settings_as_env
from worker.app import get_celery_app


@pytest.fixture
def dispatch_settings(worker_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """The process's EAGLENEST_* settings point at the worker tests' broker and an empty queue."""
    for key, value in settings_as_env(worker_settings).items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    redis.Redis.from_url(worker_settings.broker_url).delete(worker_settings.worker_queue)
    yield worker_settings
    redis.Redis.from_url(worker_settings.broker_url).delete(worker_settings.worker_queue)
    monkeypatch.undo()
    get_settings.cache_clear()


def _queued(settings: Settings) -> list[dict[str, Any]]:
    raw = redis.Redis.from_url(settings.broker_url).lrange(settings.worker_queue, 0, -1)
    messages = [json.loads(item) for item in raw]
    for message in messages:
        message["args"] = json.loads(base64.b64decode(message["body"]))[0]
    return messages


def test_enqueue_puts_the_job_id_on_the_configured_queue(dispatch_settings: Settings) -> None:
    task_id = enqueue_optimization_job(42)

    [message] = _queued(dispatch_settings)
    assert message["headers"]["id"] == task_id
    assert message["headers"]["task"] == RUN_OPTIMIZATION_JOB
    assert message["args"] == [42]


def test_stopping_a_job_that_was_never_queued_queues_it_for_confirmation(dispatch_settings: Settings) -> None:
    request_stop(7, None)

    [message] = _queued(dispatch_settings)
    assert message["args"] == [7]


def test_stopping_a_queued_job_broadcasts_a_revoke_of_its_task(dispatch_settings: Settings) -> None:
    task_id = enqueue_optimization_job(8)
    broker: Any = redis.Redis.from_url(dispatch_settings.broker_url)
    pubsub = broker.pubsub()
    pubsub.psubscribe("*celery.pidbox*")  # the workers' broadcast (remote control) channel
    assert pubsub.get_message(timeout=5)["type"] == "psubscribe"

    request_stop(8, task_id)

    broadcast = pubsub.get_message(timeout=5)
    pubsub.close()
    assert broadcast is not None
    body = json.loads(base64.b64decode(json.loads(broadcast["data"])["body"]))
    assert body["method"] == "revoke"
    assert body["arguments"]["task_id"] == task_id
    assert [message["args"] for message in _queued(dispatch_settings)] == [[8]]  # a worker discards it


def test_the_filesystem_broker_keeps_queue_and_control_in_the_state_dir(tmp_path: Any) -> None:
    app = get_celery_app(
        Settings(broker_url="filesystem://", state_dir=tmp_path, result_backend="cache+memory://")
    )
    options = app.conf.broker_transport_options
    assert (
        options["data_folder_in"]
        == options["data_folder_out"]
        == str(tmp_path.resolve() / "broker" / "queue")
    )
    assert options["control_folder"] == str(tmp_path.resolve() / "broker" / "control")
    assert (tmp_path / "broker" / "control").is_dir()
    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
