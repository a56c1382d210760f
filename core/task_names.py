"""Celery task names, shared by the api (which sends by name) and the worker (which registers them).

Sending by name keeps the api from importing the pipeline (and, later, torch).
"""

RUN_OPTIMIZATION_JOB = "optimization_job.run"
# One per endpoint: starts its serving processes and supervises them until it is deleted.
SERVE_ENDPOINT = "endpoint.serve"
# One shard of a job's fanned-out distillation (worker.fanout), on the job's own queue.
DISTIL_SHARD = "optimization_job.distil_shard"
