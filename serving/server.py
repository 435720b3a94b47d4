"""Puts a server together from a dataset's config: repository, service, REST and gRPC.

`build(config, options)` loads what the serving folder holds (so a server is
AVAILABLE only once its versions are loaded and warmed up) and returns a
`Server`, whose `serve()` runs uvicorn (uvloop and httptools) in this thread
and gRPC in its pool until SIGINT/SIGTERM; `close()` stops polling, publishes
the open request-log file and stops the batchers.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from components.io.log_policy import Applier
from pipeline.config import PipelineConfig, serving_log_dir
from serving.batching import DEFAULT_MAX_BATCH_SIZE, DEFAULT_TIMEOUT_MS
from serving.codec import ExampleEncoder, SequenceExampleEncoder
from serving.metrics import Metrics
from serving.repository import DEFAULT_POLL_SECONDS, Repository
from serving.request_log import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_SECONDS,
    RequestLog,
    salvage,
)
from serving.rest import DEFAULT_MAX_BODY_BYTES, RestApp
from serving.service import Service, Split

log = logging.getLogger("serving")
DEFAULT_PORT = 8501  # TF Serving's REST port
DEFAULT_GRPC_PORT = 8500  # and its gRPC port


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    grpc_port: int | None = DEFAULT_GRPC_PORT  # None: no gRPC
    token: str | None = None
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    batch_timeout_ms: float = DEFAULT_TIMEOUT_MS
    poll_seconds: float = DEFAULT_POLL_SECONDS
    max_request_bytes: int = DEFAULT_MAX_BODY_BYTES
    log_fraction: float = 1.0
    log_dir: str | None = None  # default: <data root>/serving-log
    log_max_bytes: int = DEFAULT_MAX_BYTES
    log_max_seconds: float = DEFAULT_MAX_SECONDS
    shadow: bool = False
    split: str | None = None
    grpc_workers: int = 32
    model_name: str | None = None  # default: the dataset's name
    loopback: bool = field(init=False, default=True)


def encoder(config: PipelineConfig) -> ExampleEncoder | SequenceExampleEncoder | None:
    """What turns request JSON into the model's serialized examples (None: no schema)."""
    types = schema_types(config)
    if not types:
        return None
    if config.example_gen == "sequence":
        from components.validation.schema_importer import load_schema, sequence_column_types

        steps = set(config.sequence.features)
        every = sequence_column_types(load_schema(config.schema_file))
        return SequenceExampleEncoder(
            {n: t for n, t in every.items() if n not in steps},
            {n: t for n, t in every.items() if n in steps},
            config.label_key,
        )
    return ExampleEncoder(types, config.label_key)


def schema_types(config: PipelineConfig) -> dict[str, str] | None:
    """Feature -> INT/FLOAT/BYTES from the dataset's curated schema (None: no schema)."""
    from components.validation.schema_importer import load_schema, schema_column_types

    if not config.schema_file or not os.path.isfile(config.schema_file):
        return None
    return schema_column_types(load_schema(config.schema_file))


def class_names(config: PipelineConfig) -> list[str] | None:
    if config.image is not None and getattr(config.image, "class_names", None):
        return list(config.image.class_names)
    for options in (config.tabular, config.sequence):
        if options is not None and getattr(options, "classes", None):
            return [str(c) for c in options.classes]
    return None


class Server:
    def __init__(self, config: PipelineConfig, options: ServeOptions, model: str) -> None:
        from runtime.access import is_loopback

        self.config = config
        self.options = options
        options.loopback = is_loopback(options.host)
        self.metrics = Metrics(options.max_batch_size)
        self._served: set[str] = set()  # the versions served at the last swap
        self.repository = Repository(
            model,
            config.serving_dir,
            max_batch_size=options.max_batch_size,
            batch_timeout_ms=options.batch_timeout_ms,
            poll_seconds=options.poll_seconds,
            observe_batch=lambda v, sig, rows: self.metrics.batch_size.labels(
                model, str(v), sig
            ).observe(rows),
            on_swap=self._gauges,
        )
        self.request_log = None
        if options.log_fraction > 0:
            folder = options.log_dir or serving_log_dir(config)
            # The dataset's request_log: policy; without its key this refuses to start.
            policy = Applier(config.request_log)
            salvaged = salvage(folder)
            if salvaged:
                log.warning(
                    "published %d request-log file(s) left by a stopped server", len(salvaged)
                )
            self.request_log = RequestLog(
                folder,
                fraction=options.log_fraction,
                label_key=config.label_key,
                max_bytes=options.log_max_bytes,
                max_seconds=options.log_max_seconds,
                on_written=lambda n: self.metrics.logged.labels(model).inc(n),
                on_dropped=lambda n: self.metrics.log_dropped.labels(model).inc(n),
                policy=policy,
            )
        self.service = Service(
            self.repository,
            self.metrics,
            encoder(config),
            request_log=self.request_log,
            shadow=options.shadow,
            split=Split.parse(options.split) if options.split else None,
            class_names=class_names(config),
            log_inputs={"image_bytes": "image"} if config.example_gen == "image" else None,
        )
        self.app = RestApp(
            self.service,
            token=options.token,
            loopback=options.loopback,
            max_body_bytes=options.max_request_bytes,
        )
        self.grpc_server = None
        self.grpc_port: int | None = None

    def load(self) -> None:
        """Loads (and warms up) what the serving folder holds now; then keeps polling."""
        self.repository.refresh()
        self.repository.start()

    def _gauges(self, state) -> None:
        model, m = self.repository.model, self.metrics
        m.loaded.labels(model).set(len(state.versions))
        for label, version in state.labels.items():
            m.label_version.labels(model, label).set(version)
        served = {str(v) for v in state.versions}
        for version in served | self._served:
            m.version_served.labels(model, version).set(1 if version in served else 0)
        self._served = served
        m.swaps.labels(model).inc()
        m.last_swap.labels(model).set_to_current_time()

    def start_grpc(self) -> int | None:
        from serving.grpc_api import start_grpc

        if self.options.grpc_port is None:
            return None
        self.grpc_server, self.grpc_port = start_grpc(
            self.service,
            self.options.host,
            self.options.grpc_port,
            self.options.token,
            self.options.grpc_workers,
            max_message_bytes=self.options.max_request_bytes,
        )
        return self.grpc_port

    def uvicorn_config(self, **overrides):
        import uvicorn

        kwargs = dict(
            host=self.options.host,
            port=self.options.port,
            loop="uvloop",
            http="httptools",
            log_level="warning",
            access_log=False,
            lifespan="on",
            # Keep-alive connections from load balancers and clients are reused.
            timeout_keep_alive=30,
        )
        kwargs.update(overrides)
        return uvicorn.Config(self.app, **kwargs)

    def close(self) -> None:
        self.repository.stop()
        if self.grpc_server is not None:
            self.grpc_server.stop(grace=5).wait(10)
        if self.request_log is not None:
            self.request_log.close()
