"""``eaglenest client install-waiters``: the AWS CLI side of the client shim."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from botocore import __version__ as botocore_version
from botocore.exceptions import BotoCoreError, ClientError

from client.errors import EaglenestClientError
from client.factory import eaglenest_client
from client.install_waiters import default_data_path, install_waiters
from client.results import download_results
from client.results_text import format_job_results
from client.waiter_model import OPTIMIZATION_JOB_WAITER


def register_client_commands(subparsers: Any) -> None:
    client = subparsers.add_parser("client", help="helpers for AWS CLI and boto3 users")
    commands = client.add_subparsers(dest="client_command", required=True, metavar="COMMAND")
    install = commands.add_parser(
        "install-waiters",
        help="make `aws sagemaker wait optimization-job-completed-or-stopped` work "
        "(keeps the shipped waiters)",
    )
    install.add_argument(
        "--data-path",
        type=Path,
        default=None,
        help="botocore data directory to install into "
        "(default: the first AWS_DATA_PATH entry, else ~/.aws/models)",
    )
    install.set_defaults(handler=run_install_waiters)
    results = commands.add_parser(
        "results",
        help="download a COMPLETED job's outputs (sha256-checked) and print its benchmark table, "
        "deployment recommendation and lineage",
    )
    results.add_argument("name", help="optimization job name")
    results.add_argument(
        "--out", type=Path, default=None, help="where to download the outputs (default: ./results/NAME)"
    )
    results.add_argument(
        "--endpoint-url", default=None, help="eaglenest endpoint (default: environment, then stack.json)"
    )
    results.set_defaults(handler=run_results)


def run_results(args: argparse.Namespace) -> int:
    try:
        client = eaglenest_client(endpoint_url=args.endpoint_url)
        results = download_results(client, args.name, args.out or Path("results") / args.name)
        print(format_job_results(results))
    except (EaglenestClientError, BotoCoreError, ClientError, OSError, ValueError) as error:
        print(f"eaglenest client results: {error}", file=sys.stderr)
        return 1
    return 0


def run_install_waiters(args: argparse.Namespace) -> int:
    target = args.data_path or default_data_path()
    try:
        installed = install_waiters(target)
    except (OSError, ValueError) as error:
        print(f"eaglenest client install-waiters: {error}", file=sys.stderr)
        return 1
    kept = f"; kept your own: {', '.join(installed.kept)}" if installed.kept else ""
    print(
        f"installed {OPTIMIZATION_JOB_WAITER} into {installed.path}, merged with the "
        f"{len(installed.shipped)} SageMaker waiters of botocore {botocore_version}{kept}\n"
        "re-run after upgrading botocore/awscli so that new shipped waiters are not hidden\n"
        "try: aws sagemaker wait optimization-job-completed-or-stopped --optimization-job-name NAME "
        "--endpoint-url URL"
    )
    return 0
