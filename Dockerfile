# eaglenest: one image for the api, the worker and the migrate step (the command picks the role).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# torch first and pinned, from the CPU index: resolving `eaglenest` without it would pull the
# multi-GB CUDA build. A GPU worker image passes a CUDA index instead, e.g.
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 .
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"

WORKDIR /app

# Dependencies change less often than code: install them in their own layer. The stub
# packages only let setuptools resolve the project's metadata before the code is copied.
COPY pyproject.toml README.md requirements.lock ./
RUN mkdir -p api worker trainer db migrations \
    && pip install -c requirements.lock . \
    && pip uninstall -y eaglenest

COPY alembic.ini ./
COPY api ./api
COPY db ./db
COPY migrations ./migrations
COPY trainer ./trainer
COPY worker ./worker
# Editable: alembic finds migrations/versions and alembic.ini in /app, where they were copied.
RUN pip install --no-deps -e .

# Never run as root: a job's artefacts and temp files belong to an unprivileged user.
RUN useradd --create-home --uid 10001 eaglenest
USER eaglenest

EXPOSE 8600
ENTRYPOINT ["eaglenest"]
CMD ["api"]
