"""Stage 'publish': staged outputs to S3OutputLocation, lineage.json last, then the output model.

Order matters for readers of the output location:
1. an old lineage.json there is deleted first (the location is about to change);
2. the head's config.json is rewritten with the K the benchmark recommends (worker.head_serving)
   and staged again, then each staged file is copied to its final key;
3. OutputConfig.SageMakerModel, if asked for, is created pointing at the new head;
4. lineage.json - the commit marker - is written, listing every file with its sha256;
5. OptimizationOutput is recorded and the staging prefix is deleted.
A redelivered job whose lineage.json is already in place skips to step 5.
"""

from __future__ import annotations

from pathlib import Path

from core.head_files import HEAD_CONFIG, HEAD_FILES, OPTIONAL_HEAD_FILES
from core.output_layout import BENCHMARK_CSV, BENCHMARK_JSON, HEAD_DIR, TRAINING_METRICS
from trainer.file_digest import sha256_of
from worker.artifacts import required
from worker.context import JobContext
from worker.head_serving import write_recommended_tokens
from worker.lineage import PublishedFile, build_lineage
from worker.output_model import OutputModel, create_output_model, output_model_request


def publish_outputs(ctx: JobContext) -> None:
    layout = ctx.layout
    if ctx.artifacts.published_lineage is None:
        if ctx.s3.head(layout.lineage) is not None:
            ctx.s3.delete(layout.lineage)
        _write_serving_k(ctx)
        outputs = _copy_outputs(ctx)
        output_model = _create_output_model(ctx)
        ctx.report(f"Committing {layout.lineage.uri}", fraction=0.9)
        ctx.s3.put_json(
            build_lineage(ctx.job, ctx.artifacts, outputs=outputs, output_model=output_model), layout.lineage
        )
    else:
        _create_output_model(ctx)  # a run that died after the commit may not have got here
    benchmark = ctx.artifacts.benchmark
    ctx.store.set_output(
        ctx.job.id,
        {"RecommendedInferenceImage": _inference_image(ctx)},
        None if benchmark is None else benchmark.report.get("recommendation"),
    )
    removed = ctx.s3.delete_prefix(layout.staging)
    ctx.report(f"Published to {layout.final.uri} ({removed} staged files cleaned up)", fraction=1.0)


def _write_serving_k(ctx: JobContext) -> None:
    """The head's config gets the recommended K; deterministic, so a redelivered publish
    writes the same bytes (and lineage's sha256 stays right)."""
    train = required(ctx.artifacts.train, "the training result")
    benchmark = required(ctx.artifacts.benchmark, "the benchmark report")
    model = required(ctx.artifacts.model, "the base model")
    config_path = train.head_dir / HEAD_CONFIG
    tokens = write_recommended_tokens(
        config_path,
        benchmark.report,
        head_uri=ctx.layout.head_uri,
        trained=train.result.get("hyperparameters", {}).get("ttt_steps"),
        verifier=model.location.uri,
    )
    ctx.s3.upload_file(config_path, ctx.layout.staged(HEAD_DIR + HEAD_CONFIG))
    ctx.report(
        f"Head config: serve with K={tokens.served} ({tokens.reason or 'the trained K'})", fraction=0.05
    )


def _local_outputs(ctx: JobContext) -> dict[str, Path]:
    """The local copy of every published file (what was uploaded to staging)."""
    train = required(ctx.artifacts.train, "the training result")
    benchmark = required(ctx.artifacts.benchmark, "the benchmark report")
    files = {HEAD_DIR + name: train.head_dir / name for name in HEAD_FILES}
    for name in OPTIONAL_HEAD_FILES:
        if (train.head_dir / name).is_file():
            files[HEAD_DIR + name] = train.head_dir / name
    files[BENCHMARK_JSON] = benchmark.json_path
    files[BENCHMARK_CSV] = benchmark.csv_path
    files[TRAINING_METRICS] = train.metrics_path
    return files


def _copy_outputs(ctx: JobContext) -> list[PublishedFile]:
    layout = ctx.layout
    outputs = []
    files = _local_outputs(ctx)
    for index, (relative, local) in enumerate(files.items()):
        ctx.check()
        ctx.report(f"Publishing {relative}", fraction=0.1 + 0.7 * index / len(files))
        destination = layout.published(relative)
        ctx.s3.copy(layout.staged(relative), destination)
        outputs.append(
            PublishedFile(
                path=relative, uri=destination.uri, sha256=sha256_of(local), size=local.stat().st_size
            )
        )
    return outputs


def _create_output_model(ctx: JobContext) -> OutputModel | None:
    name = ctx.job.output_model_name
    if name is None:
        return None
    model = required(ctx.artifacts.model, "the base model")
    request = output_model_request(
        ctx.job,
        name=name,
        base_model=model.location,
        head_uri=ctx.layout.head_uri,
        image=_inference_image(ctx),
    )
    # The model and its tags are committed when this unit of work ends (the service never commits).
    with ctx.store.unit_of_work() as session:
        created = create_output_model(session, ctx.job, request)
    ctx.report(f"Created the SageMaker model {created.name} with the new head", fraction=0.85)
    return created


def _inference_image(ctx: JobContext) -> str:
    container = ctx.job.source_model_container
    image = None if container is None else container.image
    return image or ctx.settings.recommended_inference_image
