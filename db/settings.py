"""Process configuration: one Settings object, read from EAGLENEST_* environment variables."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# Used only to encrypt stored secret access keys in development; production refuses it
# so a leaked default can never decrypt a production database dump.
DEVELOPMENT_SECRET_KEY = "eaglenest-development-only-secret-key"


class Settings(BaseSettings):
    """Everything the api, worker and CLI read from the environment."""

    model_config = SettingsConfigDict(env_prefix="EAGLENEST_", env_ignore_empty=True, extra="ignore")

    environment: Literal["development", "production"] = Field(
        default="development", description="production turns on the safety checks below."
    )
    database_url: str = Field(
        default="postgresql+psycopg://postgres@127.0.0.1:5432/eaglenest",
        description="SQLAlchemy URL: postgresql+psycopg://... or sqlite:///path (embedded stack).",
    )
    broker_url: str = Field(default="redis://127.0.0.1:6379/0", description="Celery broker URL.")
    result_backend: str = Field(default="redis://127.0.0.1:6379/1", description="Celery result backend.")
    worker_queue: str = Field(
        default="optimization-jobs",
        description="Celery queue the api enqueues jobs on and workers consume (tests use their own).",
    )
    instance_type_queues: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="Queue of a job by its DeploymentInstanceType: shell patterns to queue names, first "
        'match wins (JSON: {"ml.g5.*": "gpu", "ml.p4d.*": "gpu"}); a type no pattern matches goes to '
        "worker_queue. Workers pick their queues with `eaglenest worker --queues`.",
    )
    worker_shutdown_grace_seconds: float = Field(
        default=30.0,
        ge=0,
        description="On SIGTERM (with REMAP_SIGTERM=SIGQUIT) a running job gets this long, then is requeued.",
    )
    s3_endpoint_url: str | None = Field(default=None, description="S3 endpoint; unset means AWS S3.")
    s3_access_key_id: str | None = Field(
        default=None,
        description="S3 credentials of the worker (and of the dashboard, to read results).",
    )
    s3_secret_access_key: SecretStr | None = Field(default=None, description="Secret for s3_access_key_id.")
    default_region: str = Field(default="us-east-1", description="Region when a request names none.")
    state_dir: Path = Field(default=Path("state"), description="Local state of the embedded stack.")
    api_host: str = Field(default="127.0.0.1", description="Interface the api binds.")
    api_port: int = Field(default=8600, ge=1, le=65535, description="Port the api binds.")
    api_hostnames: Annotated[list[str], NoDecode] = Field(
        default=["localhost", "127.0.0.1", "::1"],
        description="Host names (or addresses) clients reach the api by, comma-separated: a signed "
        "Host naming anything else is refused. api_host is added when it is one address; * allows any.",
    )
    api_workers: int = Field(default=1, ge=1, description="uvicorn worker processes for `eaglenest api`.")
    secret_key: SecretStr = Field(
        default=SecretStr(DEVELOPMENT_SECRET_KEY),
        description="Encrypts the secret access keys stored in the database.",
    )
    previous_secret_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="Former secret_key values, comma-separated: still decrypt what they encrypted, "
        "so the key can be rotated (see `eaglenest keys reencrypt`).",
    )
    seed_dev_key: bool = Field(default=False, description="Create the test/test key at start-up.")
    allow_dev_key: bool = Field(
        default=False, description="Let production run while the well-known test/test key exists."
    )
    max_request_body_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="Larger request bodies get 413 before authentication, while they are read.",
    )
    sigv4_max_skew_seconds: int = Field(
        default=900, ge=1, description="How far X-Amz-Date may be from the server clock (AWS: 15 min)."
    )
    access_key_cache_seconds: float = Field(
        default=5.0,
        ge=0,
        description="How long the api keeps an access key's secret in memory; also how long a deleted "
        "key keeps working.",
    )
    max_active_optimization_jobs: int = Field(
        default=100, ge=1, description="Per account: STARTING/INPROGRESS/STOPPING jobs at once."
    )
    log_retention_days: int = Field(
        default=30,
        ge=1,
        le=3653,
        description="CloudWatch Logs: the retention of the groups the server creates (older events are "
        "deleted as new ones arrive).",
    )
    # --- the worker's job pipeline (worker/)
    cache_dir: Path | None = Field(
        default=None,
        description="Local cache of S3 models and data, keyed by ETag; default <state_dir>/cache.",
    )
    builtin_datasets_uri: str = Field(
        default="s3://eaglenest-datasets/builtin/",
        description="S3 prefix of catalog.json and the built-in datasets (jobs without TrainingDataSource).",
    )
    distillation_cache_uri: str | None = Field(
        default=None,
        description="S3 prefix of the shared distillation cache: conversations the target distilled, "
        "reused by later jobs on the same model, data and generation settings (read and written with "
        "the EAGLENEST_S3_* credentials); unset: none.",
    )
    base_heads_uri: str | None = Field(
        default=None,
        description="S3 prefix of the base heads (the Base EAGLE row): one per base model, keyed by its "
        "content hash, trained on the built-in datasets the first time a job needs one (or by "
        "`eaglenest base-heads build`) and reused (read and written with the EAGLENEST_S3_* "
        "credentials); unset: none.",
    )
    base_head_train_minutes: float = Field(
        default=30.0,
        gt=0,
        description="Training budget of a base head built inside a job (it counts against that job's "
        "MaxRuntimeInSeconds, which caps it).",
    )
    base_head_train_overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="TrainConfig fields for base heads, over the built-in recipe (self-instruct prompts "
        'and distilled replies) and train_overrides (JSON: {"self_instruct_conversations": 500}).',
    )
    max_model_archive_bytes: int = Field(
        default=200 * 1024**3,
        ge=1,
        description="A model.tar.gz (ModelDataSource CompressionType Gzip) that unpacks to more "
        "bytes fails the job.",
    )
    max_skipped_record_fraction: float = Field(
        default=0.01, ge=0, le=1, description="Jobs fail when more of their data records are malformed."
    )
    job_lease_seconds: float = Field(
        default=30.0,
        gt=0,
        description="A job whose worker sent no heartbeat for this long is resumed elsewhere.",
    )
    job_reaper_interval_seconds: float = Field(
        default=10.0, gt=0, description="How often each worker looks for jobs whose worker was lost."
    )
    max_job_attempts: int = Field(
        default=3, ge=1, description="Runs of a job (first + resumes) before it fails."
    )
    device: Literal["auto", "cpu", "cuda"] = Field(
        default="cpu",
        description="Where this worker's training (jobs and base heads) and its endpoints' serving "
        "processes run: cpu, cuda (fails the job or endpoint without a GPU) or auto (cuda when torch sees "
        "a GPU). On CUDA, bf16 where the GPU supports it.",
    )
    train_nproc: int = Field(
        default=1,
        ge=1,
        description="Data-parallel training processes per job on this worker (torch.distributed: gloo on "
        "CPU, NCCL on CUDA with one GPU each); set per queue by the workers that consume it.",
    )
    train_overrides: dict[str, Any] = Field(
        default_factory=dict, description='TrainConfig fields for every job (JSON: {"batch_tokens": 8192}).'
    )
    benchmark_overrides: dict[str, Any] = Field(
        default_factory=dict,
        description="ServingBenchmarkConfig fields for every job's benchmark "
        '(JSON: {"concurrency": [1, 4], "requests_per_level": 8}).',
    )
    # --- distillation fan-out (worker.fanout): a job's replies written by every worker of its queue
    distillation_shard_conversations: int = Field(
        default=0,
        ge=0,
        description="Fan a job's distillation out as Celery tasks of about this many conversations "
        "(rounded up to whole chunks of 8 generation batches) to every worker of the job's queue; "
        "0: the job's own worker distils everything.",
    )
    distillation_shard_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        description="A shard whose worker sent no heartbeat for this long is given to another worker.",
    )
    recommended_inference_image: str = Field(
        default="vllm/vllm-openai:latest",
        description="OptimizationOutput.RecommendedInferenceImage when the source model names no image.",
    )

    # --- endpoints (CreateEndpoint): serving processes a worker task starts and supervises
    endpoint_instance_types: Annotated[list[str], NoDecode] = Field(
        default=["ml.g5.xlarge", "ml.g5.2xlarge", "ml.g6.xlarge", "ml.m5.xlarge", "ml.c5.xlarge"],
        description="Instance types endpoint workers serve, comma-separated; each is a Celery queue "
        "(endpoint_queue_prefix + type). CreateEndpointConfig refuses other types.",
    )
    endpoint_queue_prefix: str = Field(
        default="endpoints.", description="Queue of an instance type's endpoints: this prefix + the type."
    )
    max_endpoint_instances: int = Field(
        default=4, ge=1, description="Most InitialInstanceCount one production variant may ask for."
    )
    endpoint_instance_host: str = Field(
        default="127.0.0.1", description="Address serving processes bind (0.0.0.0 when the api is elsewhere)."
    )
    endpoint_advertised_host: str | None = Field(
        default=None,
        description="Host the api reaches serving processes by (a compose service name); "
        "default: the bind address.",
    )
    endpoint_lease_seconds: float = Field(
        default=30.0,
        gt=0,
        description="An endpoint whose supervisor sent no heartbeat for this long is supervised anew.",
    )
    endpoint_instance_threads: int = Field(
        default=1, ge=1, description="torch threads of each serving process (one CPU core each)."
    )

    @field_validator("api_hostnames", mode="before")
    @classmethod
    def _split_hostnames(cls, value: Any) -> Any:
        return (
            [name.strip() for name in value.split(",") if name.strip()] if isinstance(value, str) else value
        )

    @field_validator("endpoint_instance_types", mode="before")
    @classmethod
    def _split_instance_types(cls, value: Any) -> Any:
        if isinstance(value, str) and value.startswith("["):
            return json.loads(value)  # as tests' settings_as_env writes lists
        return (
            [name.strip() for name in value.split(",") if name.strip()] if isinstance(value, str) else value
        )

    @field_validator("instance_type_queues", mode="before")
    @classmethod
    def _parse_queue_mapping(cls, value: Any) -> Any:
        """JSON from the environment; empty (compose's default) is no mapping."""
        if isinstance(value, str):
            return json.loads(value) if value.strip() else {}
        return value

    @field_validator("previous_secret_keys", mode="before")
    @classmethod
    def _split_previous_keys(cls, value: Any) -> Any:
        return [key.strip() for key in value.split(",") if key.strip()] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _refuse_unsafe_production(self) -> Self:
        if self.environment != "production":
            return self
        if self.secret_key.get_secret_value() == DEVELOPMENT_SECRET_KEY:
            raise ValueError("EAGLENEST_SECRET_KEY must be set to a private value in production")
        if self.seed_dev_key and not self.allow_dev_key:
            raise ValueError(
                "EAGLENEST_SEED_DEV_KEY creates the public test/test access key; production refuses it "
                "unless EAGLENEST_ALLOW_DEV_KEY=true"
            )
        return self

    @property
    def served_hostnames(self) -> list[str]:
        """api_hostnames, plus api_host unless it is a wildcard address (0.0.0.0, ::)."""
        if self.api_host in ("", "0.0.0.0", "::", *self.api_hostnames):
            return list(self.api_hostnames)
        return [*self.api_hostnames, self.api_host]

    def endpoint_queue(self, instance_type: str) -> str:
        return f"{self.endpoint_queue_prefix}{instance_type}"

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide Settings; tests call ``get_settings.cache_clear()`` after changing the env."""
    return Settings()
