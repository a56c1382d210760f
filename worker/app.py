"""The Celery app and the worker entrypoint (``eaglenest worker`` / ``celery -A worker.app worker``)."""

from __future__ import annotations

from collections.abc import Sequence

from celery import Celery

from core.celery_config import celery_config
from db.settings import Settings, get_settings

# Imported by the worker at start-up; the api never imports them (it sends tasks by name).
TASK_MODULES = ["worker.tasks", "worker.endpoint_tasks", "worker.signals"]

_apps: dict[tuple[str, ...], Celery] = {}


def create_celery_app(settings: Settings) -> Celery:
    app = Celery("eaglenest", include=TASK_MODULES, set_as_current=False)
    app.conf.update(celery_config(settings))
    return app


def get_celery_app(settings: Settings | None = None) -> Celery:
    """The app for these settings, built once per broker/queue configuration.

    Keyed on the values that shape the app so that a process whose settings change (tests
    do) gets an app for the new broker instead of a stale one.
    """
    settings = settings or get_settings()
    key = (settings.broker_url, settings.result_backend, settings.worker_queue, str(settings.state_dir))
    if key not in _apps:
        _apps[key] = create_celery_app(settings)
    return _apps[key]


celery_app = get_celery_app()


def worker_argv(
    *,
    concurrency: int = 1,
    loglevel: str = "INFO",
    hostname: str | None = None,
    queues: list[str] | None = None,
) -> list[str]:
    """``celery worker`` arguments; without ``queues`` it consumes the app's default (worker_queue)."""
    argv = ["worker", f"--loglevel={loglevel}", f"--concurrency={concurrency}", "--pool=prefork"]
    if queues:
        argv += ["-Q", ",".join(queues)]
    if hostname:
        argv.append(f"--hostname={hostname}")
    return argv


def endpoint_worker_argv(
    settings: Settings, *, concurrency: int = 8, loglevel: str = "INFO", hostname: str | None = None
) -> list[str]:
    """A worker for endpoints: it consumes every served instance type's queue, and runs each
    endpoint's supervisor in a thread (the serving processes are its children), so one worker
    holds ``concurrency`` endpoints at once."""
    queues = ",".join(settings.endpoint_queue(kind) for kind in settings.endpoint_instance_types)
    argv = [
        "worker",
        f"--loglevel={loglevel}",
        f"--concurrency={concurrency}",
        "--pool=threads",
        "-Q",
        queues,
    ]
    if hostname:
        argv.append(f"--hostname={hostname}")
    return argv


def main(argv: Sequence[str] | None = None) -> None:
    """Run a worker in the foreground; extra arguments go to ``celery worker`` unchanged."""
    celery_app.worker_main(list(argv) if argv is not None else worker_argv())


if __name__ == "__main__":
    main()
