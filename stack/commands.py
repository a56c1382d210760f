"""The `eaglenest up`, `eaglenest worker` and `eaglenest wait-for-services` subcommands."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from db.settings import get_settings
from stack.embedded import EmbeddedStack, EmbeddedStackOptions
from stack.readiness import StackStartError
from stack.stack_file import StackInfo, live_stack_pid, stack_file_path, write_stack_file
from stack.supervisor import Supervisor
from stack.wait_for_services import ServiceUnavailableError, wait_for_services


class ShutdownRequestedError(BaseException):
    """SIGTERM/SIGINT arrived: unwind to the supervisor, which stops every child.

    A BaseException so that no ``except Exception`` on the way can swallow it.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)


def register_stack_commands(subparsers: Any) -> None:
    """Add `up`, `worker` and `wait-for-services` to the `eaglenest` parser.

    Each subcommand sets ``handler``: a function from the parsed args to the exit code.
    """
    up = subparsers.add_parser(
        "up",
        help="run the embedded stack (SQLite, a Celery worker, SeaweedFS S3, the api) in one directory",
    )
    up.add_argument(
        "--state-dir", type=Path, default=Path("state"), help="where everything is kept (default: state)"
    )
    up.add_argument("--host", default="127.0.0.1", help="interface the api binds (default: 127.0.0.1)")
    up.add_argument("--port", type=int, default=8600, help="api port (default: 8600)")
    up.add_argument(
        "--s3-port", type=int, default=8601, help="SeaweedFS S3 port; 0 picks a free one (default: 8601)"
    )
    up.add_argument("--region", default="us-east-1", help="region clients sign for (default: us-east-1)")
    up.add_argument(
        "--worker-concurrency", type=int, default=1, help="jobs the worker runs at once (default: 1)"
    )
    up.set_defaults(handler=run_up)

    worker = subparsers.add_parser("worker", help="run a Celery worker that executes optimization jobs")
    worker.add_argument(
        "--concurrency",
        type=int,
        default=None,
        dest="concurrency_given",
        help="jobs run at once (default: 1, one per GPU; with --endpoints, 8 endpoints)",
    )
    worker.add_argument("--loglevel", default="INFO", help="Celery log level (default: INFO)")
    worker.add_argument("--hostname", default=None, help="Celery node name (default: celery@<host>)")
    worker.add_argument(
        "--queues",
        default=None,
        help="comma-separated queues to consume (default: EAGLENEST_WORKER_QUEUE); a GPU worker takes "
        "the queue EAGLENEST_INSTANCE_TYPE_QUEUES maps GPU instance types to, e.g. --queues gpu",
    )
    worker.add_argument(
        "--endpoints",
        action="store_true",
        help="serve endpoints instead: consume the EAGLENEST_ENDPOINT_INSTANCE_TYPES queues and run "
        "each endpoint's serving processes (--concurrency endpoints at once, default 8)",
    )
    worker.set_defaults(handler=run_worker)

    wait = subparsers.add_parser(
        "wait-for-services", help="wait until the database and the broker accept connections (prestart)"
    )
    wait.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each (default: 60)")
    wait.set_defaults(handler=run_wait_for_services)


def run_worker(args: argparse.Namespace) -> int:
    # Imported only when a worker runs: importing worker.app builds the Celery app from Settings.
    from worker.app import endpoint_worker_argv, main, worker_argv  # noqa: PLC0415

    if args.endpoints:
        concurrency = 8 if args.concurrency_given is None else args.concurrency_given
        main(
            endpoint_worker_argv(
                get_settings(), concurrency=concurrency, loglevel=args.loglevel, hostname=args.hostname
            )
        )
        return 0
    main(
        worker_argv(
            concurrency=args.concurrency_given or 1,
            loglevel=args.loglevel,
            hostname=args.hostname,
            queues=None if args.queues is None else [q.strip() for q in args.queues.split(",") if q.strip()],
        )
    )
    return 0


def run_wait_for_services(args: argparse.Namespace) -> int:
    try:
        wait_for_services(get_settings(), timeout_seconds=args.timeout)
    except ServiceUnavailableError as error:
        print(f"eaglenest wait-for-services: {error}", file=sys.stderr)
        return 1
    return 0


def run_up(args: argparse.Namespace) -> int:
    options = EmbeddedStackOptions(
        state_dir=args.state_dir,
        api_host=args.host,
        api_port=args.port,
        s3_port=args.s3_port,
        region=args.region,
        worker_concurrency=args.worker_concurrency,
    )
    return serve_embedded_stack(options)


def serve_embedded_stack(options: EmbeddedStackOptions) -> int:
    """Start the stack and run until SIGTERM/SIGINT, then stop everything.

    A crashed api or worker is restarted (stack.json counts the restarts); the stack stops
    when SeaweedFS exits, or when a child keeps crashing past its restart limit.
    """
    state_dir = options.state_dir.resolve()
    other = live_stack_pid(state_dir)
    if other is not None:
        # Two stacks on one state directory would share the SQLite file and the queue.
        print(f"eaglenest up: {state_dir} is already served by eaglenest up (pid {other})", file=sys.stderr)
        return 1
    previous_handlers = _handle_shutdown_signals(_raise_shutdown)
    # Everything the stack and its children create (database, WAL, logs, S3 data) is the
    # owner's alone: the database holds encrypted secrets and the logs name jobs and buckets.
    previous_umask = os.umask(0o077)
    stack_file = stack_file_path(state_dir)
    try:
        with Supervisor() as supervisor:
            info = EmbeddedStack(options, supervisor).start()
            _print_banner(info)
            while _supervise(supervisor, info):
                time.sleep(0.5)
            return 1
    except ShutdownRequestedError as shutdown:
        print(f"eaglenest up: {shutdown} received; stack stopped", file=sys.stderr)
        return 0
    except StackStartError as error:
        print(f"eaglenest up: the stack did not start: {error}", file=sys.stderr)
        return 1
    finally:
        # Leaving the file behind would point clients at a stack that is gone.
        stack_file.unlink(missing_ok=True)
        os.umask(previous_umask)
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)


def _supervise(supervisor: Supervisor, info: StackInfo) -> bool:
    """One look at the children: report exits, record restarts; False when the stack must stop."""
    check = supervisor.check()
    for child in check.exits:
        if child.restart_in_seconds is None:
            print(
                f"eaglenest up: {child.process.name} exited with status {child.exit_code}; "
                "stopping the stack\n"
                f"last lines of {child.process.spec.log_path}:\n{child.process.log_tail()}",
                file=sys.stderr,
            )
            return False
        print(
            f"eaglenest up: {child.process.name} exited with status {child.exit_code}; restarting it in "
            f"{child.restart_in_seconds:.1f} s (restart {child.restarts}); the other parts keep running",
            file=sys.stderr,
            flush=True,
        )
    if check.restarted:
        for process in check.restarted:
            print(f"eaglenest up: {process.name} restarted (pid {process.pid})", file=sys.stderr, flush=True)
        info.restarts = supervisor.restart_counts()
        write_stack_file(Path(info.state_dir), info)
    return True


def _raise_shutdown(signum: int, frame: FrameType | None) -> None:
    # From here on the supervisor is stopping the children; a second Ctrl-C must not cut
    # that short and leave orphans, so further signals are ignored.
    _handle_shutdown_signals(signal.SIG_IGN)
    raise ShutdownRequestedError(signum)


def _handle_shutdown_signals(handler: Any) -> dict[signal.Signals, Any]:
    """Install ``handler`` for SIGTERM, SIGINT and SIGHUP; returns the handlers it replaced."""
    return {
        signum: signal.signal(signum, handler) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    }


def _print_banner(info: StackInfo) -> None:
    print(
        "eaglenest is up\n"
        f"  SageMaker api : {info.api_url}\n"
        f"  S3 (SeaweedFS): {info.s3_endpoint_url}\n"
        f"  region        : {info.region}\n"
        f"  credentials   : {info.aws_access_key_id} / {info.aws_secret_access_key}\n"
        f"  state         : {info.state_dir} (stack.json, logs/)\n"
        f"try: AWS_ACCESS_KEY_ID={info.aws_access_key_id} AWS_SECRET_ACCESS_KEY={info.aws_secret_access_key} "
        f"aws sagemaker list-optimization-jobs --endpoint-url {info.api_url} --region {info.region}\n"
        "stop with Ctrl-C",
        flush=True,
    )
