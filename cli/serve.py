"""`eaglenest api`: serve the api with uvicorn on the configured host and port."""

from __future__ import annotations

import argparse
import os
from typing import Any

import uvicorn

from db.settings import get_settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("api", help="serve the AWS-compatible api (uvicorn)")
    parser.add_argument("--host", help="interface to bind (default: EAGLENEST_API_HOST, 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to bind (default: EAGLENEST_API_PORT, 8600)")
    parser.add_argument("--workers", type=int, help="worker processes (default: EAGLENEST_API_WORKERS, 1)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.host:
        # The app reads its settings from the environment (in every uvicorn worker): with
        # EAGLENEST_API_HOST set, the address bound is also a host name it answers to.
        os.environ["EAGLENEST_API_HOST"] = args.host
        get_settings.cache_clear()
    settings = get_settings()
    uvicorn.run(
        "api.app:app",
        host=args.host or settings.api_host,
        port=args.port or settings.api_port,
        workers=args.workers or settings.api_workers,
        proxy_headers=False,
        access_log=False,
    )
    return 0
