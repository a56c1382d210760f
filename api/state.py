"""What one running api holds: settings, database access, the authenticator and the job dispatcher."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from api.auth.authenticator import AccessKeyCache, Authenticator
from api.auth.signed_headers import HostPolicy
from api.metrics import ApiMetrics
from api.runtime.capture_spool import spool_directory
from api.runtime.state import RuntimeState
from core.job_dispatcher import JobDispatcher
from db.session import create_db_engine, create_read_session_factory, create_session_factory
from db.settings import Settings


@dataclass(frozen=True)
class ApiState:
    settings: Settings
    engine: Engine
    session_factory: sessionmaker[Session]
    read_session_factory: sessionmaker[Session]
    authenticator: Authenticator
    dispatcher: JobDispatcher
    metrics: ApiMetrics
    runtime: RuntimeState

    @classmethod
    def build(cls, settings: Settings, dispatcher: JobDispatcher) -> ApiState:
        engine = create_db_engine(settings.database_url, pre_ping=False)
        session_factory = create_session_factory(engine)
        read_session_factory = create_read_session_factory(engine)
        authenticator = Authenticator(
            read_session_factory,
            max_skew=timedelta(seconds=settings.sigv4_max_skew_seconds),
            cache=AccessKeyCache(settings.access_key_cache_seconds),
            hosts=HostPolicy(settings.served_hostnames),
        )
        metrics = ApiMetrics()
        return cls(
            settings=settings,
            engine=engine,
            session_factory=session_factory,
            read_session_factory=read_session_factory,
            authenticator=authenticator,
            dispatcher=dispatcher,
            metrics=metrics,
            runtime=RuntimeState(
                read_session_factory,
                metrics.registry,
                capture_spool_dir=spool_directory(settings.state_dir, settings.database_url),
                write_session_factory=session_factory,
            ),
        )
