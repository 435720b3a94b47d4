"""A run is planned once: a config -> the facts every runner needs before it starts.

`plan_run` is the one place that looks at the disk for a run: it selects the
span(s) the run ingests (`select_spans`, once), sizes their bytes, picks the
Beam mode (`--beam auto` decides from those bytes, nothing is listed twice),
and reads what the definition needs (the schema and its hash, the data
layout, the validation settings, the serving data's cache key, the batch
inference span, the code fingerprints). `create_pipeline` (definition.py)
then builds the graph from the plan without any I/O of its own.

The CLI (`tfxp run`), the Airflow DAG and the Kubeflow compile all reach it
through the pre-run check (`tfxp/preflight.py`), which adds the checks of this
machine (object storage answers, directories writable) around it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from components.validation.schema_importer import file_sha256, load_schema
from components.validation.serving_data import serving_cache_key
from components.validation.settings import ValidationSettings, load_settings
from pipeline.beam import AUTO, BeamOptions, auto_mode, beam_args, check
from pipeline.config import PipelineConfig, serving_log_dir
from pipeline.fingerprint import code_fingerprint, defines
from pipeline.spans import (
    SpanDir,
    check_remote_spans,
    inference_span,
    input_pattern,
    is_remote,
    select_spans,
)


class PlanError(ValueError):
    """The run cannot be planned; the message names what is missing and the fix."""


@dataclass(frozen=True)
class BeamChoice:
    """Where the Beam components run: a mode of pipeline/beam.py (None: no Beam
    option was given, the config's own arguments run), those arguments, and why
    (`note`: a line for the user, or None)."""

    mode: str | None
    args: tuple[str, ...]
    note: str | None = None


@dataclass(frozen=True)
class InferenceSpan:
    """The span the in-pipeline batch inference scores (files relative to `root`)."""

    root: str
    span: int
    files: tuple[str, ...]
    content_sha256: str


@dataclass(frozen=True)
class RunPlan:
    """A run, decided: the config it runs with (Beam arguments and shard count
    set) and everything read from disk to get there."""

    config: PipelineConfig
    # The span folders ExampleGen and the window ingest, oldest first; () when
    # the data root is in object storage (one span per run, chosen by TFX).
    spans: tuple[SpanDir, ...]
    # Raw bytes of `spans` (None: not known, remote data).
    input_bytes: int | None
    beam: BeamChoice
    input_pattern: str
    schema: Any  # tensorflow_metadata Schema
    schema_sha256: str
    settings: ValidationSettings
    serving_sha256: str
    # Module fingerprints by dotted path (preprocessing_fn, run_fn, tuner_fn).
    fingerprints: dict[str, str]
    inference: InferenceSpan | None = None


def window_span_plan(plan: RunPlan, span: SpanDir) -> RunPlan:
    """The plan of one older span of `plan`'s window, ingested on its own before the
    run: the same facts (schema, settings, Beam), that span alone (its newest
    version, as select_spans chose it), nothing read again."""
    config = plan.config.replace(span=span.span, version=None, window=1)
    return dataclasses.replace(plan, config=config, spans=(span,), input_bytes=span.nbytes)


def tuner_fn_path(run_fn: str) -> str:
    """A trainer's search lives beside its run_fn: `<run_fn's module>.tuner_fn`."""
    return run_fn.rsplit(".", 1)[0] + ".tuner_fn"


def plan_run(
    config: PipelineConfig,
    beam: BeamOptions | None = None,
    *,
    list_remote: bool = True,
    cores: int | None = None,
) -> RunPlan:
    """Plans one run of `config`.

    Args:
      config: the run's config (overrides applied; Beam not yet chosen when
        `beam` is given).
      beam: the Beam options asked for; mode `auto` picks in-process or
        multi-process from the selected spans' bytes. None keeps the config's
        own Beam arguments.
      list_remote: an s3:// or gs:// data root is listed for its spans (False:
        not from this machine, e.g. a compile for a cluster).
      cores: this machine's cores for `auto` (default: os.cpu_count()).

    Raises PlanError (schema), SpanError (data folder), ValidationConfigError
    (validation settings) or BeamConfigError (Beam options), all ValueErrors
    naming the problem and the fix; nothing is written.
    """
    if beam is not None and beam.mode != AUTO:
        check(beam)  # first: a mode missing what it needs is the user's flags, not the data
    if "://" not in config.schema_file and not os.path.isfile(config.schema_file):
        raise PlanError(
            f"schema {config.schema_file} does not exist: write the curated schema there "
            "(`tfxp schema propose` drafts one from a run's statistics)"
        )
    if is_remote(config.data_root):
        if list_remote:
            check_remote_spans(config)
        spans: tuple[SpanDir, ...] = ()
        size = None
    else:
        spans = tuple(select_spans(config))
        size = sum(s.nbytes for s in spans)
    settings = load_settings(config.validation_file).with_warn_only(config.warn_only)
    choice, config = _beam(config, beam, spans, size, cores or os.cpu_count() or 1)
    try:
        schema = load_schema(config.schema_file)
    except ValueError as e:  # names the file and the parse error
        raise PlanError(str(e)) from None
    return RunPlan(
        config=config,
        spans=spans,
        input_bytes=size,
        beam=choice,
        input_pattern=_input_pattern(config, spans),
        schema=schema,
        schema_sha256=file_sha256(config.schema_file),
        settings=settings,
        serving_sha256=serving_cache_key(
            config.serving_pattern, serving_log_dir(config), config.serving_log_window
        ),
        fingerprints=_fingerprints(config),
        inference=_inference(config),
    )


def _beam(
    config: PipelineConfig,
    options: BeamOptions | None,
    spans: tuple[SpanDir, ...],
    size: int | None,
    cores: int,
) -> tuple[BeamChoice, PipelineConfig]:
    """(the Beam choice, the config carrying its arguments)."""
    if options is None:
        return BeamChoice(None, tuple(config.beam_args)), config
    note = None
    if options.mode == AUTO:
        mode = auto_mode(size, cores)
        if mode == "in-process" and not options.extra_args:
            # Nothing to say and nothing to change: the config's own arguments stand.
            return BeamChoice(mode, tuple(config.beam_args)), config
        if mode != "in-process":
            label = ", ".join(s.label for s in spans)
            note = (
                f"Beam: {mode}, one worker per core ({label}: {(size or 0) / 2**20:.0f} MB "
                "of input); --beam in-process keeps it in this process"
            )
        options = dataclasses.replace(options, mode=mode)
    changes: dict[str, Any] = {"beam_args": beam_args(options)}
    if options.mode == "multi-process" and not config.num_shards and config.example_gen == "csv":
        # Beam hands out work by file (a GZIP shard cannot be split), and the
        # ingest sizes shards at 256 MB of CSV: a span under that is one shard,
        # which one worker would read alone. Two shards per worker keep all busy.
        # (Image ingest cuts at least ten shards per worker itself when the data allows.)
        changes["num_shards"] = 2 * (options.num_workers or cores)
    config = config.replace(**changes)
    return BeamChoice(options.mode, tuple(config.beam_args), note), config


def _input_pattern(config: PipelineConfig, spans: tuple[SpanDir, ...]) -> str:
    """ExampleGen's pattern for the layout the selected spans showed (select_spans
    refuses a folder that mixes layouts), without listing the folder again."""
    if config.versioned is None and spans:
        versioned = any(s.version is not None for s in spans)
        return config.version_pattern if versioned else config.span_pattern
    return input_pattern(config)


def _fingerprints(config: PipelineConfig) -> dict[str, str]:
    """The code the cache keys cover: a changed module re-executes its component."""
    paths = [config.preprocessing_fn, config.run_fn]
    if config.tuning is not None:
        tuner_fn = tuner_fn_path(config.run_fn)
        if not defines(tuner_fn):
            raise PlanError(
                f"dataset {config.pipeline_name!r} declares tuning:, but its trainer has no "
                f"search: {tuner_fn} is not defined (the taxi, generic tabular, image and sequence "
                "trainers have one; remove tuning: or add a tuner_fn beside the run_fn, see "
                "docs/tuning.md)"
            )
        paths.append(tuner_fn)
    return {p: code_fingerprint(p) for p in paths}


def _inference(config: PipelineConfig) -> InferenceSpan | None:
    """With `batch_inference.in_pipeline`: the newest span of the inference data root."""
    if not config.inference.in_pipeline:
        return None
    from components.io.content_fingerprint import files_sha256

    span = inference_span(config)
    root = config.inference_data_root
    files = [str(f) for f in span.files]
    return InferenceSpan(
        root=root,
        span=span.span,
        files=tuple(os.path.relpath(f, root) for f in files),
        content_sha256=files_sha256(files, root)[0],
    )
