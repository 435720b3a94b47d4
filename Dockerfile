# The image every Kubeflow Pipelines task of this pipeline runs (and, with a
# distributed Beam runner, every Beam worker): the pinned environment from the
# same locks as .venv, plus the project's code, importable from any directory.
#
#   docker build -t REGISTRY/tfx-pipeline:TAG .
#   docker push REGISTRY/tfx-pipeline:TAG
#   python -m kubeflow compile --image REGISTRY/tfx-pipeline:TAG --pipeline-root gs://...
#
# Keep the versions below equal to the locks (tests/unit/kubeflow/test_kubeflow.py checks).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm
ARG BEAM_VERSION=2.72.0

# Beam's worker boot program: lets Dataflow/Flink/Spark use this image as the
# SDK container (--sdk_container_image), so remote workers import our code too.
FROM apache/beam_python3.11_sdk:${BEAM_VERSION} AS beam

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="tfx-pipeline" \
      org.opencontainers.image.description="TFX 1.16 pipeline: tasks for Kubeflow Pipelines and Beam workers"

ARG UV_VERSION=0.13.9
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    TF_USE_LEGACY_KERAS=1 \
    TF_CPP_MIN_LOG_LEVEL=2 \
    UV_NO_CACHE=1

# 1. The environment, from the committed locks only (cached while they are
#    unchanged). The same two steps as scripts/setup.sh: the hashed lock, then
#    tfx and ml-pipelines-sdk without their (Python <3.11) dependency metadata.
#    --compile-bytecode: importing TFX otherwise recompiles ~3 GB of sources.
COPY requirements.lock requirements-nodeps.lock /tmp/locks/
RUN python -m venv "$VIRTUAL_ENV" \
 && "$VIRTUAL_ENV/bin/python" -m pip install --quiet --no-cache-dir "uv==${UV_VERSION}" \
 && uv pip sync --python "$VIRTUAL_ENV/bin/python" --require-hashes --compile-bytecode \
      /tmp/locks/requirements.lock \
 && uv pip install --python "$VIRTUAL_ENV/bin/python" --no-deps --require-hashes \
      --compile-bytecode -r /tmp/locks/requirements-nodeps.lock \
 && python -c "import tfx, tensorflow_transform, tensorflow_data_validation, ml_metadata"

COPY --from=beam /opt/apache/beam /opt/apache/beam

# Java for pyspark: a task run with `--beam-runner spark` is the Spark driver of its
# Beam work (beam_spark.SparkRunner), and pyspark's driver is a JVM. (The man1
# folder: openjdk's package set-up writes there, and slim images drop it.)
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*

# 2. The project. KFP tasks import components.*, trainer.* and pipeline.* by
#    name (custom executor, Python-function component, resolver strategy,
#    preprocessing_fn / run_fn), so the code is installed like scripts/setup.sh
#    does (a .pth entry for /pipeline), and the embedded data and curated schema
#    sit at /pipeline/data and /pipeline/schema, the paths the compiled spec names.
WORKDIR /pipeline
COPY . /pipeline
RUN uv pip install --python "$VIRTUAL_ENV/bin/python" --no-deps --no-build-isolation \
      -C editable_mode=compat -e /pipeline \
 && cd / && python -c "import components.example_gen.csv_example_gen, \
components.example_gen.image_example_gen, components.validation.schema_importer, components.validation.gate, \
components.release.atomic_pusher, components.resolvers.baseline, components.evaluation.slicing.evaluator, \
components.evaluation.extractors, components.fast.stats.executor, components.fast.transform.executor, \
components.release.serving_check.component, \
components.release.model_card.component, trainer.taxi.preprocessing, trainer.taxi.train, \
trainer.image.preprocessing, trainer.image.train, pipeline.definition"

# Beam workers start through the boot program; KFP tasks set their own command
# (python -m tfx.orchestration.kubeflow.v2...), so this entrypoint serves both.
ENTRYPOINT ["/opt/apache/beam/boot"]
