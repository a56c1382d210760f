"""JobSpec: the job row's stored request, parsed once into the api's own request shapes."""

from __future__ import annotations

from typing import Any

import pytest

from core.job_errors import JobFailedError
from core.job_spec import InvalidJobSpecError, JobSpec
from core.sagemaker.shapes.optimization_jobs import CreateOptimizationJobRequest
from core.sagemaker.shapes.sagemaker_models import CreateModelInput
from db.models.optimization_job import OptimizationJob
from tests.factories.optimization_jobs import create_optimization_job_request, unsaved_job_row
from tests.factories.sagemaker_models import create_model_request


def _stored_columns(**overrides: Any) -> dict[str, Any]:
    """The request columns as CreateOptimizationJob stores them: each member's wire form."""
    request = CreateOptimizationJobRequest.model_validate(create_optimization_job_request())
    container = CreateModelInput.model_validate(create_model_request()).primary_container
    assert container is not None
    columns: dict[str, Any] = {
        "model_source": request.model_source.to_wire(),
        "optimization_environment": request.optimization_environment,
        "optimization_configs": [config.to_wire() for config in request.optimization_configs],
        "output_config": request.output_config.to_wire(),
        "stopping_condition": request.stopping_condition.to_wire(),
        "source_model_container": container.to_wire(),
    }
    return columns | overrides


def _row(**columns: Any) -> OptimizationJob:
    return unsaved_job_row(**_stored_columns(**columns))


def test_from_row_parses_the_stored_request_into_typed_members() -> None:
    spec = JobSpec.from_row(_row())

    assert spec.aws_account_id == "111122223333"
    assert spec.model_source.s3 is not None
    assert spec.model_source.s3.s3_uri == "s3://models/llama/"
    assert spec.output_config.s3_output_location == "s3://out/jobs/"
    assert spec.output_model_name == "optimized-model"
    assert spec.max_runtime_seconds == 36000
    source = spec.training_data_source
    assert source is not None
    assert (source.s3_uri, source.s3_data_type) == ("s3://data/train/", "S3Prefix")
    assert spec.source_model_container is not None
    assert spec.source_model_container.environment == {"OPTION_TENSOR_PARALLEL_DEGREE": "1"}
    assert spec.knobs.num_speculative_tokens == 3


def test_each_parsed_member_serialises_back_to_the_stored_json() -> None:
    stored = _stored_columns()
    spec = JobSpec.from_row(_row())

    assert spec.model_source.to_wire() == stored["model_source"]
    assert [config.to_wire() for config in spec.optimization_configs] == stored["optimization_configs"]
    assert spec.output_config.to_wire() == stored["output_config"]
    assert spec.stopping_condition.to_wire() == stored["stopping_condition"]
    assert spec.source_model_container is not None
    assert spec.source_model_container.to_wire() == stored["source_model_container"]
    assert spec.optimization_environment == stored["optimization_environment"]


def test_optional_members_left_out_read_as_none() -> None:
    spec = JobSpec.from_row(
        _row(
            optimization_configs=[{"ModelSpeculativeDecodingConfig": {"Technique": "EAGLE"}}],
            output_config={"S3OutputLocation": "s3://out/jobs/"},
            stopping_condition={},
            source_model_container=None,
            optimization_environment=None,
        )
    )

    assert spec.training_data_source is None
    assert spec.output_model_name is None
    assert spec.max_runtime_seconds is None
    assert spec.source_model_container is None
    assert spec.knobs.ttt_steps is None


def test_a_stored_request_that_does_not_parse_names_the_member() -> None:
    with pytest.raises(
        InvalidJobSpecError, match=r"OutputConfig\.S3OutputLocation: Field required"
    ) as raised:
        JobSpec.from_row(_row(output_config={"KmsKeyId": "key"}))
    assert isinstance(raised.value, JobFailedError)


def test_a_bad_eagle_knob_fails_when_first_read_not_when_parsed() -> None:
    spec = JobSpec.from_row(_row(optimization_environment={"EAGLE_TTT_STEPS": "2.5"}))

    with pytest.raises(JobFailedError, match=r"^OptimizationEnvironment: EAGLE_TTT_STEPS='2.5': "):
        spec.knobs  # noqa: B018 - the property raises
