"""The instances of one rollout (generation) of an endpoint, kept at InitialInstanceCount.

Each instance's state goes to its endpoint_instances row, which DescribeEndpoint shows and
InvokeEndpoint routes by. A crashed instance is started again; during the first start an
instance that keeps crashing fails the rollout instead.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from db.queries.endpoint_instance import FAILED, IN_SERVICE, PENDING, report_endpoint_instance
from db.session import session_scope
from worker.endpoints.instance_logs import instance_log_buffers
from worker.endpoints.model_files import EndpointFailedError, ServedModel
from worker.endpoints.serving_process import ServingProcess

logger = logging.getLogger(__name__)

# Crashes of one instance before it first served that fail the rollout.
MAX_START_ATTEMPTS = 2
RESTART_DELAY_SECONDS = 1.0


class Fleet:
    def __init__(
        self,
        *,
        endpoint_id: int,
        generation: int,
        variant_name: str,
        count: int,
        model: ServedModel,
        threads: int,
        log_dir: Path,
        host: str = "127.0.0.1",
        advertised: str | None = None,
        device: str = "cpu",
    ) -> None:
        self.device = device
        self.host = host
        self.advertised = advertised
        self.endpoint_id = endpoint_id
        self.generation = generation
        self.variant_name = variant_name
        self.model = model
        self.threads = threads
        self.log_dir = log_dir
        # /aws/sagemaker/Endpoints/<name>, a stream per instance; one buffer per instance
        # survives its restarts, so a crash and its restart read on in one stream.
        self.logs = instance_log_buffers(endpoint_id, generation, variant_name, count)
        self.processes: list[ServingProcess] = [self._new_process(ordinal) for ordinal in range(count)]
        self._served: list[bool] = [False] * count
        self._attempts: list[int] = [0] * count
        self._reported: list[str | None] = [None] * count

    def _new_process(self, ordinal: int) -> ServingProcess:
        log = self.log_dir / f"generation-{self.generation}-instance-{ordinal}.log"
        return ServingProcess(
            self.model,
            threads=self.threads,
            log_path=log,
            host=self.host,
            advertised=self.advertised,
            device=self.device,
            on_line=self.logs[ordinal].write,
        )

    def flush_logs(self) -> None:
        for buffer in self.logs:
            buffer.flush()

    def start(self) -> None:
        for ordinal, process in enumerate(self.processes):
            self._attempts[ordinal] = 1
            process.start()
            self._report(ordinal, PENDING, None, "Starting the serving process")

    def _report(
        self, ordinal: int, status: str, url: str | None, message: str, *, restarted: bool = False
    ) -> None:
        self._reported[ordinal] = status
        self.logs[ordinal].write(f"[{status}] {message}")
        # The log line lands before the status does: a client that stops polling the logs once
        # it sees InService (the SDK's wait_for_endpoint) must still find the line that says why.
        self.logs[ordinal].flush()
        with session_scope() as session:
            report_endpoint_instance(
                session,
                endpoint_id=self.endpoint_id,
                generation=self.generation,
                variant_name=self.variant_name,
                ordinal=ordinal,
                status=status,
                url=url,
                message=message,
                restarted=restarted,
            )

    def poll(self) -> None:
        """Report instances that came up; restart those that exited (EndpointFailedError when one
        never served and crashed MAX_START_ATTEMPTS times)."""
        self.flush_logs()
        for ordinal, process in enumerate(self.processes):
            if process.exit_code() is not None:
                self._restart(ordinal, process)
            elif process.url is not None and self._reported[ordinal] != IN_SERVICE:
                self._served[ordinal] = True
                message = f"Serving on {process.url} (pid {process.pid})"
                self._report(ordinal, IN_SERVICE, process.url, message)

    def _restart(self, ordinal: int, process: ServingProcess) -> None:
        reason = process.failure()
        logger.warning("endpoint %s instance %s: %s", self.endpoint_id, ordinal, reason)
        if not self._served[ordinal] and self._attempts[ordinal] >= MAX_START_ATTEMPTS:
            self._report(ordinal, FAILED, None, reason)
            raise EndpointFailedError(
                f"Instance {ordinal} of variant {self.variant_name} failed to start: {reason}"
            )
        self._report(ordinal, FAILED, None, f"Restarting after a crash: {reason}")
        time.sleep(RESTART_DELAY_SECONDS)
        replacement = self._new_process(ordinal)
        self.processes[ordinal] = replacement
        self._attempts[ordinal] += 1
        replacement.start()
        self._report(ordinal, PENDING, None, f"Restarted after a crash: {reason}", restarted=True)

    def ready(self) -> bool:
        return all(status == IN_SERVICE for status in self._reported)

    def stop(self) -> None:
        """All instances drain at once: SIGTERM to each, then wait for each."""
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait_stopped()
        self.flush_logs()
