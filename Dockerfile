# eaglenest: two images from one Dockerfile (docker-compose.yml builds both).
#   api     the base install (`pip install eaglenest`): the api and the migrate step; no torch,
#           no transformers, no guidellm.      docker build --target api -t eaglenest-api .
#   worker  `eaglenest[worker]`: the Celery worker, with torch and the model side.
#                                               docker build --target worker -t eaglenest-worker .
# Without --target the last stage, worker, is built (it can run every command).

FROM python:3.11-slim AS python

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Never run as root: a job's artefacts and temp files belong to an unprivileged user.
RUN useradd --create-home --uid 10001 eaglenest
WORKDIR /app
# Dependencies change less often than code: each image installs them in their own layer. The
# stub packages only let setuptools resolve the project's metadata before the code is copied.
COPY pyproject.toml README.md requirements.lock ./
RUN mkdir -p api cli client core db engine migrations servebench serving speculative stack trainer worker

# The source, copied once and taken whole by both images.
FROM scratch AS source
COPY pyproject.toml README.md alembic.ini /app/
COPY api /app/api
COPY cli /app/cli
COPY client /app/client
COPY core /app/core
COPY db /app/db
COPY engine /app/engine
COPY migrations /app/migrations
COPY servebench /app/servebench
COPY serving /app/serving
COPY speculative /app/speculative
COPY stack /app/stack
COPY trainer /app/trainer
COPY worker /app/worker
# The shipped Base EAGLE heads (worker.shipped_heads reads them from /app/heads).
COPY heads /app/heads

FROM python AS api
RUN pip install -c requirements.lock . \
    && pip uninstall -y eaglenest
COPY --from=source /app ./
# Editable: alembic finds migrations/versions and alembic.ini in /app, where they were copied.
RUN pip install --no-deps -e .
USER eaglenest
EXPOSE 8600
ENTRYPOINT ["eaglenest"]
CMD ["api"]

FROM python AS worker
# torch first and pinned, from the CPU index: resolving `eaglenest[worker]` without it would
# pull the multi-GB CUDA build. A GPU worker image passes a CUDA index instead, e.g.
#   docker build --target worker --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 .
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"
RUN pip install -c requirements.lock ".[worker]" \
    && pip uninstall -y eaglenest
COPY --from=source /app ./
RUN pip install --no-deps -e .
USER eaglenest
ENTRYPOINT ["eaglenest"]
CMD ["worker", "--concurrency", "1"]
