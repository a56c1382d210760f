"""Assembles the embedded stack: SeaweedFS, the SQLite database, a Celery worker and the api."""

from __future__ import annotations

import os
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

from core.s3 import S3Location
from core.s3_store import S3Store
from db.queries.account import DEV_ACCESS_KEY_ID, DEV_SECRET_ACCESS_KEY, ensure_dev_access_key
from db.queries.role import ensure_dev_roles
from db.queries.secret_rotation import reencrypt_stored_secrets
from db.session import get_engine, get_session_factory, session_scope
from db.settings import DEVELOPMENT_SECRET_KEY, get_settings
from migrations.runner import upgrade_to_head
from stack.layout import StateLayout
from stack.ports import require_free_port
from stack.processes import ManagedProcess, ProcessSpec, RestartPolicy
from stack.readiness import http_ok, wait_until_ready
from stack.s3_identities import S3IdentitySync, load_or_create_admin_credentials
from stack.seaweedfs import S3_IDENTITIES_FILE, S3Credentials, S3Endpoint, s3_answers, start_seaweedfs
from stack.secret_key import load_or_create_secret_key
from stack.stack_file import StackInfo, write_stack_file
from stack.supervisor import Supervisor

# The development key works for both the SageMaker api and SeaweedFS, so one
# `aws configure` (or AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test) covers both.
DEV_CREDENTIALS = S3Credentials(DEV_ACCESS_KEY_ID, DEV_SECRET_ACCESS_KEY)
# Ctrl-C should stop a development stack quickly, even with a job running.
EMBEDDED_WORKER_SHUTDOWN_GRACE_SECONDS = 5
# The shared distillation cache (worker.distillation_cache): a bucket whose name starts with a
# digit but no account id, so no account's S3 identity reaches it (stack/s3_identities.py);
# only the service's own identity reads and writes it, for every account's jobs.
EMBEDDED_DISTILLATION_CACHE_URI = "s3://0-eaglenest-cache/distilled/"
# The base heads (worker.base_heads), in the same service-only bucket for the same reason.
EMBEDDED_BASE_HEADS_URI = "s3://0-eaglenest-cache/base-heads/"
# A crashed api or worker is started again; the worker's job resumes from its checkpoint
# once its lease runs out (the reaper of the new worker takes it over).
CHILD_RESTARTS = RestartPolicy()


@dataclass(frozen=True)
class EmbeddedStackOptions:
    state_dir: Path
    api_host: str = "127.0.0.1"
    api_port: int = 8600
    s3_port: int = 8601
    region: str = "us-east-1"
    worker_concurrency: int = 1
    startup_timeout_seconds: float = 90.0


class EmbeddedStack:
    def __init__(self, options: EmbeddedStackOptions, supervisor: Supervisor) -> None:
        self.options = options
        self.layout = StateLayout(options.state_dir.resolve())
        self.supervisor = supervisor

    def start(self) -> StackInfo:
        """Start every part and wait until each is ready; the caller's Supervisor stops them."""
        # Fail before starting anything, rather than after SeaweedFS and the worker are up.
        require_free_port(self.options.api_host, self.options.api_port, option="--port")
        if self.options.s3_port:
            require_free_port("127.0.0.1", self.options.s3_port, option="--s3-port")
        self.layout.create()
        # The service's own S3 identity; the dev key is the development account's, limited to
        # its buckets like every account's (stack/s3_identities.py).
        admin = load_or_create_admin_credentials(self.layout.s3_root)
        s3, seaweedfs = start_seaweedfs(
            self.supervisor,
            root=self.layout.s3_root,
            credentials=admin,
            s3_port=self.options.s3_port,
            log_path=self.layout.log("seaweedfs"),
            region=self.options.region,
            timeout_seconds=self.options.startup_timeout_seconds,
        )
        env = self.child_environment(s3)
        # Jobs never create buckets: the cache's is made here, with the service's identity.
        S3Store(s3.client()).ensure_bucket(
            S3Location.parse(EMBEDDED_DISTILLATION_CACHE_URI, field="cache").bucket
        )
        # State directories from before the per-directory key hold secrets encrypted with the
        # public development key: this process may still read them, to re-encrypt them
        # (_prepare_database); the api and the worker know only the directory's own key.
        self._configure_this_process({**env, "EAGLENEST_PREVIOUS_SECRET_KEYS": DEVELOPMENT_SECRET_KEY})
        self._prepare_database()
        self._start_s3_identity_sync(admin, s3, seaweedfs)
        self._start_worker(env)
        self._start_endpoint_worker(env)
        api_url = self._start_api(env)
        info = StackInfo(
            api_url=api_url,
            s3_endpoint_url=s3.endpoint_url,
            region=self.options.region,
            aws_access_key_id=DEV_CREDENTIALS.access_key_id,
            aws_secret_access_key=DEV_CREDENTIALS.secret_access_key,
            state_dir=str(self.layout.root),
            database_url=self.layout.database_url,
            pid=os.getpid(),
            logs={process.name: str(process.spec.log_path) for process in self.supervisor.processes},
        )
        write_stack_file(self.layout.root, info)
        return info

    def child_environment(self, s3: S3Endpoint) -> dict[str, str]:
        """EAGLENEST_* settings shared by the api, the worker and this process."""
        return {
            "EAGLENEST_ENVIRONMENT": "development",
            "EAGLENEST_DATABASE_URL": self.layout.database_url,
            # filesystem:// keeps the queue in the state directory: no Redis to install.
            "EAGLENEST_BROKER_URL": "filesystem://",
            # Job status lives in the database; results are never read back.
            "EAGLENEST_RESULT_BACKEND": "cache+memory://",
            "EAGLENEST_STATE_DIR": str(self.layout.root),
            "EAGLENEST_S3_ENDPOINT_URL": s3.endpoint_url,
            "EAGLENEST_S3_ACCESS_KEY_ID": s3.access_key_id,
            "EAGLENEST_S3_SECRET_ACCESS_KEY": s3.secret_access_key,
            "EAGLENEST_DEFAULT_REGION": self.options.region,
            "EAGLENEST_API_HOST": self.options.api_host,
            "EAGLENEST_API_PORT": str(self.options.api_port),
            "EAGLENEST_SEED_DEV_KEY": "true",
            "EAGLENEST_SECRET_KEY": load_or_create_secret_key(self.layout.root),
            "EAGLENEST_WORKER_SHUTDOWN_GRACE_SECONDS": str(EMBEDDED_WORKER_SHUTDOWN_GRACE_SECONDS),
            "EAGLENEST_DISTILLATION_CACHE_URI": EMBEDDED_DISTILLATION_CACHE_URI,
            "EAGLENEST_BASE_HEADS_URI": EMBEDDED_BASE_HEADS_URI,
        }

    def _configure_this_process(self, env: dict[str, str]) -> None:
        # Migrating and seeding run here, through the same Settings the children read.
        os.environ.update(env)
        get_settings.cache_clear()
        get_session_factory.cache_clear()
        get_engine.cache_clear()

    def _prepare_database(self) -> None:
        upgrade_to_head(self.layout.database_url)
        # WAL lets the api read while the worker writes; the mode is stored in the file itself.
        with sqlite3.connect(self.layout.database_file) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
        with session_scope() as session:
            reencrypt_stored_secrets(session)
            ensure_dev_access_key(session)
            ensure_dev_roles(session)
        get_engine().dispose()
        # Created under `eaglenest up`'s umask 077 anyway; this tightens files of older versions.
        for path in self.layout.root.glob(f"{self.layout.database_file.name}*"):
            path.chmod(0o600)

    def _start_s3_identity_sync(
        self, admin: S3Credentials, s3: S3Endpoint, seaweedfs: ManagedProcess
    ) -> None:
        """Give every account its S3 identity now, and follow the database's changes from here on."""
        shared = (S3Location.parse(get_settings().builtin_datasets_uri, field="builtin_datasets_uri").bucket,)
        sync = S3IdentitySync(
            identities_file=self.layout.s3_root / S3_IDENTITIES_FILE,
            admin=admin,
            shared_buckets=shared,
            seaweedfs=lambda: next((p for p in self.supervisor.processes if p.name == "seaweedfs"), None),
        )
        sync.sync_once()
        dev = S3Endpoint(s3.endpoint_url, DEV_CREDENTIALS.access_key_id, DEV_CREDENTIALS.secret_access_key)
        wait_until_ready(
            lambda: s3_answers(dev),
            what="the development key on SeaweedFS S3",
            process=seaweedfs,
            timeout_seconds=self.options.startup_timeout_seconds,
        )
        sync.start()

    def _start_worker(self, env: dict[str, str]) -> None:
        log_path = self.layout.log("worker")
        log_size = log_path.stat().st_size if log_path.exists() else 0
        process = self.supervisor.start(
            ProcessSpec(
                name="worker",
                argv=[
                    sys.executable,
                    "-m",
                    "celery",
                    "--app=worker.app",
                    "worker",
                    "--loglevel=INFO",
                    f"--concurrency={self.options.worker_concurrency}",
                    "--pool=prefork",
                    "--hostname=eaglenest-embedded@%h",
                ],
                # SIGTERM: a running job gets the grace period, then its message is put back in
                # the queue folder and the next `eaglenest up` resumes it.
                env={**env, "REMAP_SIGTERM": "SIGQUIT"},
                log_path=log_path,
                cwd=self.layout.root,
                stop_timeout_seconds=EMBEDDED_WORKER_SHUTDOWN_GRACE_SECONDS + 10,
                restart=CHILD_RESTARTS,
            )
        )

        def worker_ready() -> bool:
            # Celery logs "<hostname> ready." once it consumes from the queue.
            with log_path.open("rb") as log:
                log.seek(log_size)
                return b" ready." in log.read()

        wait_until_ready(
            worker_ready,
            what="Celery worker",
            process=process,
            timeout_seconds=self.options.startup_timeout_seconds,
        )

    def _start_endpoint_worker(self, env: dict[str, str]) -> None:
        """Endpoints' supervisors (CreateEndpoint): a thread each, their serving processes its children."""
        log_path = self.layout.log("endpoints")
        log_size = log_path.stat().st_size if log_path.exists() else 0
        process = self.supervisor.start(
            ProcessSpec(
                name="endpoints",
                argv=[
                    sys.executable,
                    "-m",
                    "cli.main",
                    "worker",
                    "--endpoints",
                    "--hostname=eaglenest-endpoints@%h",
                ],
                env=env,
                log_path=log_path,
                cwd=self.layout.root,
                # The serving processes die with it (PR_SET_PDEATHSIG) when it is killed.
                stop_timeout_seconds=10.0,
                restart=CHILD_RESTARTS,
            )
        )

        def ready() -> bool:
            with log_path.open("rb") as log:
                log.seek(log_size)
                return b" ready." in log.read()

        wait_until_ready(
            ready,
            what="endpoint worker",
            process=process,
            timeout_seconds=self.options.startup_timeout_seconds,
        )

    def _start_api(self, env: dict[str, str]) -> str:
        host, port = self.options.api_host, self.options.api_port
        process = self.supervisor.start(
            ProcessSpec(
                name="api",
                argv=[sys.executable, "-m", "uvicorn", "api.app:app", "--host", host, "--port", str(port)],
                env=env,
                log_path=self.layout.log("api"),
                cwd=self.layout.root,
                stop_timeout_seconds=5.0,
                restart=CHILD_RESTARTS,
            )
        )
        api_url = f"http://{host}:{port}"
        wait_until_ready(
            http_ok(f"{api_url}/healthz"),
            what="eaglenest api",
            process=process,
            timeout_seconds=self.options.startup_timeout_seconds,
        )
        return api_url
