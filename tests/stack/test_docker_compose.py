"""docker-compose.yml and the Dockerfile, checked statically: Docker cannot run in this environment.

Compose's own interpolation rules (``${VAR:?message}``, ``${VAR:-default}``, ``${VAR-default}``)
are applied by a small interpreter below, so the tests see the values containers would get.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.main import build_parser
from db.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
# Every package of ours (pyproject.toml's packages.find include, "api*" -> "api").
_FIND = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
PACKAGES = sorted(pattern.removesuffix("*") for pattern in _FIND["include"])
# A Dockerfile line that goes on on the next one.
CONTINUATION = "\\"
REQUIRED_VARIABLES = {"POSTGRES_PASSWORD", "EAGLENEST_SECRET_KEY", "S3_ACCESS_KEY_ID", "S3_SECRET_ACCESS_KEY"}
PRODUCTION_ENV = {
    "POSTGRES_PASSWORD": "pg-secret",
    "EAGLENEST_SECRET_KEY": "a-private-production-key",
    "S3_ACCESS_KEY_ID": "AKIAPRODUCTION",
    "S3_SECRET_ACCESS_KEY": "s3-secret",
}
# Read by Celery/billiard themselves, not by Settings.
CELERY_VARIABLES = {"REMAP_SIGTERM"}
_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:\?|:-|-|\?)(?P<arg>[^}]*))?\}")


class MissingVariableError(Exception):
    pass


def interpolate(value: Any, env: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        current = env.get(name)
        if op == ":?" and not current:
            raise MissingVariableError(f"{name}: {arg}")
        if op == ":-" and not current:
            return arg
        if op == "-" and current is None:
            return arg
        return current or ""

    return _VARIABLE.sub(substitute, value)


@pytest.fixture(scope="module")
def raw_compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return document


@pytest.fixture(scope="module")
def compose(raw_compose: dict[str, Any]) -> dict[str, Any]:
    resolved: dict[str, Any] = interpolate(raw_compose, PRODUCTION_ENV)
    return resolved


def test_the_stack_has_every_service(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {
        "db", "redis", "s3", "prestart", "api", "worker", "gpu-worker", "endpoints"
    }  # fmt: skip
    assert compose["services"]["s3"]["image"].startswith("chrislusf/seaweedfs:")
    assert compose["services"]["s3"]["command"][:2] == ["server", "-s3"]


@pytest.mark.parametrize("service", ["db", "redis", "s3", "api"])
def test_long_running_services_have_healthchecks(compose: dict[str, Any], service: str) -> None:
    healthcheck = compose["services"][service]["healthcheck"]
    assert healthcheck["test"][0] in {"CMD", "CMD-SHELL"}
    assert healthcheck["retries"] >= 3


def test_postgres_healthcheck_asks_the_database_itself(compose: dict[str, Any]) -> None:
    assert "pg_isready" in compose["services"]["db"]["healthcheck"]["test"][1]


@pytest.mark.parametrize("service", ["api", "worker", "gpu-worker", "endpoints"])
def test_app_services_start_after_migration_and_healthy_dependencies(
    compose: dict[str, Any], service: str
) -> None:
    depends_on = compose["services"][service]["depends_on"]
    assert depends_on["prestart"] == {"condition": "service_completed_successfully"}
    for dependency in ("db", "redis", "s3"):
        assert depends_on[dependency]["condition"] == "service_healthy"


def test_prestart_waits_for_the_database_then_migrates(compose: dict[str, Any]) -> None:
    prestart = compose["services"]["prestart"]
    assert prestart["depends_on"]["db"]["condition"] == "service_healthy"
    script = prestart["entrypoint"][-1]
    assert script.index("eaglenest wait-for-services") < script.index("eaglenest migrate")
    assert "restart" not in prestart  # a one-shot step


def test_required_variables_have_no_defaults(raw_compose: dict[str, Any]) -> None:
    text = COMPOSE_FILE.read_text()
    required = {match["name"] for match in _VARIABLE.finditer(text) if match["op"] == ":?"}
    assert required == REQUIRED_VARIABLES
    for match in _VARIABLE.finditer(text):
        if match["name"] in REQUIRED_VARIABLES:
            assert (match["op"], match["arg"]) == (":?", "Variable not set")


@pytest.mark.parametrize("missing", sorted(REQUIRED_VARIABLES))
def test_compose_refuses_to_start_without_a_required_variable(
    raw_compose: dict[str, Any], missing: str
) -> None:
    env = {key: value for key, value in PRODUCTION_ENV.items() if key != missing}
    with pytest.raises(MissingVariableError, match=f"^{missing}: Variable not set$"):
        interpolate(raw_compose, env)


@pytest.mark.parametrize("service", ["prestart", "api", "worker", "gpu-worker", "endpoints"])
def test_app_environment_is_valid_production_settings(compose: dict[str, Any], service: str) -> None:
    environment = compose["services"][service]["environment"]
    fields = {}
    for key, value in environment.items():
        if key in CELERY_VARIABLES:
            continue
        assert key.startswith("EAGLENEST_"), key
        name = key.removeprefix("EAGLENEST_").lower()
        assert name in Settings.model_fields, f"{key} is not a Settings field"
        fields[name] = value
    settings = Settings(**fields)  # runs the production safety checks
    assert settings.environment == "production"
    assert settings.database_url == "postgresql+psycopg://eaglenest:pg-secret@db:5432/eaglenest"
    assert settings.broker_url.startswith("redis://redis:6379/")
    assert settings.s3_endpoint_url == "http://s3:8333"


@pytest.mark.parametrize("service", ["api", "worker", "gpu-worker", "endpoints"])
def test_app_commands_are_real_eaglenest_subcommands(compose: dict[str, Any], service: str) -> None:
    args = build_parser().parse_args(compose["services"][service]["command"])
    assert callable(args.handler)


def test_the_api_keeps_its_capture_spool_on_a_volume(compose: dict[str, Any]) -> None:
    api = compose["services"]["api"]
    state_dir = api["environment"]["EAGLENEST_STATE_DIR"]
    volume, mount = next(entry.split(":") for entry in api["volumes"] if entry.startswith("api-state:"))
    assert state_dir.startswith(f"{mount}/")
    assert volume in compose["volumes"]


def test_stopping_a_worker_requeues_its_job_before_docker_kills_it(compose: dict[str, Any]) -> None:
    worker = compose["services"]["worker"]
    assert worker["environment"]["REMAP_SIGTERM"] == "SIGQUIT"
    grace = float(worker["environment"]["EAGLENEST_WORKER_SHUTDOWN_GRACE_SECONDS"])
    assert grace + 10 <= int(worker["stop_grace_period"].removesuffix("s"))


def test_seaweedfs_gets_the_s3_credentials_as_its_identity_file(compose: dict[str, Any]) -> None:
    s3 = compose["services"]["s3"]
    target = s3["configs"][0]["target"]
    assert f"-s3.config={target}" in s3["command"]
    identities = json.loads(compose["configs"][s3["configs"][0]["source"]]["content"])
    credentials = identities["identities"][0]["credentials"][0]
    assert credentials == {"accessKey": "AKIAPRODUCTION", "secretKey": "s3-secret"}


def dockerfile_stages() -> dict[str, list[str]]:
    """The Dockerfile's instructions (continuation lines joined, comments dropped) by stage name."""
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    logical = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        continued = line.endswith(CONTINUATION)
        logical = " ".join(filter(None, [logical, line.removesuffix(CONTINUATION).strip()]))
        if continued:
            continue
        instruction, logical = logical, ""
        if instruction.startswith("FROM "):
            name = instruction.split()[-1] if " AS " in instruction else f"stage{len(stages)}"
            current = stages[name] = []
        current.append(instruction)
    return stages


def stage_with_base(stages: dict[str, list[str]], name: str) -> list[str]:
    """A stage's instructions after those of the stages it is built FROM."""
    instructions = stages[name]
    base = instructions[0].split()[1]
    return [*stage_with_base(stages, base), *instructions] if base in stages else instructions


def pip_installs(instructions: list[str]) -> list[str]:
    return [part.strip() for line in instructions for part in line.split("&&") if "pip install" in part]


def test_dockerfile_builds_an_api_and_a_worker_image() -> None:
    stages = dockerfile_stages()
    assert {"api", "worker"} <= set(stages)
    # Without --target, the image that can run every command.
    assert list(stages)[-1] == "worker"
    for target in ("api", "worker"):
        instructions = stage_with_base(stages, target)
        assert 'ENTRYPOINT ["eaglenest"]' in instructions
        assert "USER eaglenest" in instructions
        assert "RUN pip install --no-deps -e ." in instructions
    assert stages["api"][-1] == 'CMD ["api"]'
    assert "EXPOSE 8600" in stages["api"]
    worker_command = json.loads(stages["worker"][-1].removeprefix("CMD "))
    assert callable(build_parser().parse_args(worker_command).handler)


def test_the_api_image_is_the_base_install_without_torch() -> None:
    instructions = stage_with_base(dockerfile_stages(), "api")
    installs = pip_installs(instructions)
    assert "RUN pip install -c requirements.lock ." in installs
    assert not [line for line in installs if "torch" in line or "[" in line]
    assert not [line for line in instructions if "TORCH" in line]


def test_the_worker_image_installs_cpu_torch_before_the_worker_extra() -> None:
    instructions = stage_with_base(dockerfile_stages(), "worker")
    installs = pip_installs(instructions)
    torch_line = installs.index('RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"')
    project_line = installs.index('RUN pip install -c requirements.lock ".[worker]"')
    assert torch_line < project_line
    assert "ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in instructions
    # The locked versions the suite passed on, copied in before the install that uses them.
    copies = [line for line in instructions if line.startswith("COPY ")]
    assert any("requirements.lock" in line for line in copies)


def test_dockerfile_copies_every_package() -> None:
    stages = dockerfile_stages()
    # The stubs that let setuptools read the metadata before the code is there, and the code.
    assert f"RUN mkdir -p {' '.join(PACKAGES)}" in stages["python"]
    for package in PACKAGES:
        assert f"COPY {package} /app/{package}" in stages["source"]
    assert any(line.startswith("COPY ") and "alembic.ini" in line for line in stages["source"])
    for target in ("api", "worker"):
        assert "COPY --from=source /app ./" in stages[target]


@pytest.mark.parametrize(("service", "target"), [("prestart", "api"), ("api", "api"), ("worker", "worker")])
def test_compose_builds_each_service_from_its_image_target(
    compose: dict[str, Any], service: str, target: str
) -> None:
    build = compose["services"][service]["build"]
    assert build == {"context": ".", "target": target}
    assert target in dockerfile_stages()
    assert compose["services"][service]["image"] == f"eaglenest-{target}:latest"


def test_the_gpu_worker_is_opt_in_reserves_a_gpu_and_consumes_the_gpu_queue(compose: dict[str, Any]) -> None:
    gpu = compose["services"]["gpu-worker"]
    assert gpu["profiles"] == ["gpu"]  # `docker compose up` without --profile gpu leaves it out
    [device] = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia"
    assert device["capabilities"] == ["gpu"]
    assert gpu["build"]["args"]["TORCH_INDEX_URL"].startswith("https://download.pytorch.org/whl/cu")
    args = build_parser().parse_args(gpu["command"])
    assert args.queues == "gpu"
    assert compose["services"]["worker"]["environment"]["EAGLENEST_WORKER_QUEUE"] == "cpu"
    assert "--queues" not in compose["services"]["worker"]["command"]  # it takes EAGLENEST_WORKER_QUEUE


def test_the_gpu_worker_runs_its_jobs_on_the_gpu(compose: dict[str, Any]) -> None:
    """Settings.device defaults to cpu: a gpu-worker that does not say cuda trains on the CPU."""
    environment = compose["services"]["gpu-worker"]["environment"]
    settings = Settings(
        **{
            key.removeprefix("EAGLENEST_").lower(): value
            for key, value in environment.items()
            if key.startswith("EAGLENEST_")
        }
    )
    assert settings.device == "cuda"
    assert "EAGLENEST_DEVICE" not in compose["services"]["worker"]["environment"]  # the CPU worker's default
