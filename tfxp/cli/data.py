"""`tfxp data`: list data versions with their lineage, add a drop, generate one.

    tfxp data list [--dataset taxi] [--json]
    tfxp data add taxi new/*.csv
    tfxp data generate taxi --rows 1000000 [--seed 7] [--scale fare=1.3 ...]
    tfxp data generate photos OUT --images 100000 [--size 224] [--classes 10] [--no-broken]
    tfxp data generate sequences OUT --keys 5000 [--seed 7] [--files 3]
    tfxp data add taxi --dvc REPO --path data/trips.csv --rev v1   (tfxp/cli/data_dvc.py)
    tfxp data tag taxi 1 --tag v1-examples [--dvc REPO]

`list` reads the spans on disk and, from ML Metadata (the run dir's
metadata.sqlite), each span's ingested Examples (row count, bytes, content
fingerprint, when) and what used it: the pipeline runs, the models trained on
it (Examples -> Transform -> Trainer -> Model) and whether they were pushed
(tfxp/datasets/listing.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import Any

from metadata.store import MetadataStoreError
from pipeline.config import PipelineConfig
from pipeline.datasets import DEFAULT_DATASET, dataset_names
from pipeline.headers import rename_header
from pipeline.overrides import pipeline_config
from pipeline.spans import SpanError, list_spans
from tfxp.cli.common import (
    add_mysql_flags,
    add_run_dir_flag,
    add_storage_flags,
    storage_from_args,
    store_location,
)
from tfxp.cli.data_dvc import add_dvc_flags, register_tag
from tfxp.datasets.listing import describe_dataset, human_bytes, render
from tfxp.datasets.publish import copy_files, publish_span


def _dataset_config(args: argparse.Namespace, name: str) -> PipelineConfig:
    return pipeline_config(
        name,
        data_root=getattr(args, "data_root", None) or None,
        run_dir=getattr(args, "run_dir", None) or None,
    )


def cmd_list(args: argparse.Namespace) -> int:
    names = [args.dataset] if args.dataset else dataset_names()
    out: dict[str, Any] = {}
    texts = []
    from tfxp.storage.storage import StorageError

    for name in names:
        config = _dataset_config(args, name)
        try:
            rows = describe_dataset(config, store_location(args, config.local_dir))
        except (StorageError, MetadataStoreError) as e:
            print(f"ERROR: {e}", file=sys.stderr)
            return 1
        out[name] = {"data_root": config.data_root, "spans": [asdict(r) for r in rows]}
        texts.append(render(name, config, rows))
    print(json.dumps(out, indent=2) if args.json else "\n\n".join(texts))
    return 0


def _columns(config: PipelineConfig) -> dict[str, str]:
    from components.example_gen.labels import label_as_text
    from components.validation.schema_importer import (
        load_schema,
        schema_column_types,
        sequence_column_types,
    )

    schema = load_schema(config.schema_file)
    if config.sequence is not None:
        # An event table: context and per-event columns, and the order column as read.
        columns = sequence_column_types(schema)
        timestamps = config.sequence.order_format == "timestamp"
        columns[config.sequence.order_by] = "BYTES" if timestamps else "FLOAT"
        return columns
    columns = schema_column_types(schema)
    if config.tabular is not None and config.tabular.unlabelled_rows == "drop":
        # As ExampleGen: a label that does not parse drops its row, it does not refuse the drop.
        columns = label_as_text(columns, config.label_key)
    return columns


def _text_checks(config: PipelineConfig) -> dict:
    """How a drop's text is read and which columns must be NaN-free (as ExampleGen checks)."""
    from components.validation.schema_importer import load_schema, schema_nan_free_columns

    nan_free = schema_nan_free_columns(load_schema(config.schema_file))
    return {"encoding": config.csv_encoding, "nan_free": nan_free}


def _report_published(span, started: float) -> None:
    import time

    print(
        f"added span {span.span}: {len(span.files)} file(s), {human_bytes(span.nbytes)} at {span.path} "
        f"in {time.perf_counter() - started:.1f}s"
    )
    print("next: `tfxp run` trains on it (the latest span); `tfxp data list` shows it")


def _with_source_paths(message: str, sources) -> str:
    """Problems name the user's files, not their copies in the hidden incoming folder."""
    import re

    by_name = {os.path.basename(str(s)): str(s) for s in sources}
    return re.sub(
        r"\S*/\.incoming-[0-9a-f]+/([^\s:]+)",
        lambda m: by_name.get(m.group(1), m.group(0)),
        message,
    )


def cmd_add(args: argparse.Namespace) -> int:
    import time

    if args.dvc or (not args.files and _dataset_config(args, args.dataset).data_source):
        from tfxp.cli.data_dvc import cmd_add_dvc

        return cmd_add_dvc(args)
    if not args.files:
        print(
            "ERROR: give the drop's CSV files, or --dvc REPO --path FILE (or a `source:` "
            "block in the dataset file)",
            file=sys.stderr,
        )
        return 2
    config = _dataset_config(args, args.dataset)
    started = time.perf_counter()
    columns = _columns(config)

    def fill(folder) -> None:
        copy_files(args.files, folder)
        for f in folder.glob("*.csv"):  # original names of columns `tfxp init` renamed
            rename_header(f, columns)

    try:
        span = publish_span(config.data_root, fill, columns=columns, **_text_checks(config))
    except (SpanError, ValueError) as e:
        message = _with_source_paths(str(e), args.files)
        print(f"ERROR: {message}\nnothing was added to {config.data_root}", file=sys.stderr)
        return 1
    _report_published(span, started)
    return 0


def _resampler(config: PipelineConfig):
    from pathlib import Path

    from data.generate import TaxiModel

    if config.example_gen != "csv":
        raise SpanError(f"{config.pipeline_name} is not a CSV dataset: nothing to resample")
    spans = [s for s in list_spans(config.data_root) if s.files]
    if not spans:
        raise SpanError(f"no span under {config.data_root} to resample rows from")
    return TaxiModel(list(spans[-1].files), Path(config.schema_file), whole_rows=True)


def cmd_generate(args: argparse.Namespace) -> int:
    import time

    from data.generate import drift_from_args, generate, progress_printer

    if args.dataset == "photos":
        from pathlib import Path

        from data.photos import generate_photos

        if not args.out:
            print(
                "ERROR: photos need an output folder: tfxp data generate photos OUT",
                file=sys.stderr,
            )
            return 1
        return generate_photos(args, Path(args.out))
    if args.dataset == "sequences":
        from pathlib import Path

        from data.sequences import generate_sequences

        if not args.out:
            print(
                "ERROR: sequences need an output folder: tfxp data generate sequences OUT",
                file=sys.stderr,
            )
            return 1
        return generate_sequences(args, Path(args.out))
    if args.rows is None or args.out:
        print(f"ERROR: {args.dataset} takes --rows N (and no output folder)", file=sys.stderr)
        return 1
    config = _dataset_config(args, args.dataset)
    started = time.perf_counter()
    drift = drift_from_args(args)
    try:
        model = None  # the taxi trips' own generator
        if config.tabular is not None or config.example_gen != "csv":
            model = _resampler(config)  # any other table: its latest span's rows, resampled whole
        span = publish_span(
            config.data_root,
            lambda folder: generate(
                folder,
                args.rows,
                seed=args.seed,
                drift=drift,
                rows_per_file=args.rows_per_file,
                model=model,
                progress=progress_printer(sys.stdout),
            ),
            columns=_columns(config),
            check=args.check,
            **_text_checks(config),
        )
    except (SpanError, ValueError) as e:
        print(f"ERROR: {e}\nnothing was added to {config.data_root}", file=sys.stderr)
        return 1
    _report_published(span, started)
    return 0


def cmd_upload(args: argparse.Namespace) -> int:
    """Copies a local span (default: the embedded dataset's latest) into a bucket."""
    import time

    from components.io.encryption import export_env
    from tfxp.storage.storage import StorageError
    from tfxp.storage.upload import upload_span

    config = pipeline_config(args.dataset)
    try:
        setting = storage_from_args(args, config)
        if setting.active:  # else the environment's own TFXP_S3_SSE, if any, stands
            export_env(setting)  # upload_span's writers read it
    except ValueError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 2
    source_root = args.source_root or config.data_root
    spans = [s for s in list_spans(source_root) if s.files]
    if args.source_span is not None:
        spans = [s for s in spans if s.span == args.source_span]
    if not spans:
        which = "" if args.source_span is None else f" span {args.source_span}"
        print(f"ERROR: no{which} CSV drop under {source_root} to upload", file=sys.stderr)
        return 1
    source = spans[-1]
    started = time.perf_counter()
    try:
        done = upload_span(
            source.files, args.destination, span=args.span, create_bucket=args.create_bucket
        )
    except StorageError as e:
        print(f"ERROR: {e}\nnothing was uploaded", file=sys.stderr)
        return 1
    if done.created_bucket:
        print(f"created bucket {args.destination.split('/')[2]}")
    print(
        f"uploaded {source.label} of {source_root} ({len(done.uris)} file(s), "
        f"{human_bytes(done.nbytes)}) as span {done.span} in {time.perf_counter() - started:.1f}s:"
    )
    for uri in done.uris:
        print(f"  {uri}")
    root = args.destination.rstrip("/")
    run_dir = f"{root.split('://')[0]}://{root.split('/')[2]}/runs/{args.dataset}"
    print(f"next: tfxp run --data-root {root} --run-dir {run_dir}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `data list|add|generate` to the `tfxp` parser."""
    from data.generate import add_generate_flags
    from data.photos import add_photo_flags
    from data.sequences import add_sequence_flags

    data = sub.add_parser("data", help="list, add and generate data versions (spans)")
    dsub = data.add_subparsers(dest="data_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-root", help="dataset folder (default from the dataset config)")
        add_run_dir_flag(p, "run dir whose metadata.sqlite records ingestions")

    ls = dsub.add_parser("list", help="spans with rows, bytes, fingerprint, runs and models")
    ls.add_argument("--dataset", choices=dataset_names(), help="one dataset (default: all)")
    ls.add_argument("--json", action="store_true")
    common(ls)
    add_mysql_flags(
        ls.add_argument_group("ML Metadata on MySQL/MariaDB (default: SQLite in the run directory)")
    )
    ls.set_defaults(func=cmd_list)

    add = dsub.add_parser(
        "add", help="publish CSV files, or a DVC revision's, as the next span, atomically"
    )
    add.add_argument("dataset", choices=dataset_names())
    add.add_argument("files", nargs="*", help="the drop's CSV files (one header)")
    common(add)
    add_dvc_flags(add)
    add_mysql_flags(add.add_argument_group("ML Metadata on MySQL/MariaDB (records --dvc)"))
    add.set_defaults(func=cmd_add)
    register_tag(dsub, common, dataset_names())

    gen = dsub.add_parser(
        "generate",
        help="generate a span of any size: taxi-like trips, another table's rows resampled, "
        "photo-like images (photos OUT --images N) or event tables (sequences OUT --keys N)",
    )
    gen.add_argument("dataset", choices=[*dataset_names(), "photos", "sequences"])
    gen.add_argument("out", nargs="?", help="photos and sequences: the folder to write")
    add_generate_flags(gen, rows_required=False)
    add_photo_flags(gen.add_argument_group("photos"))
    add_sequence_flags(gen.add_argument_group("sequences (event tables)"))
    gen.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="run the CSV checks before publishing (~70k rows/s; ExampleGen checks anyway)",
    )
    common(gen)
    gen.set_defaults(func=cmd_generate)

    up = dsub.add_parser(
        "upload",
        help="copy a local span (default: the embedded dataset) into a bucket as the next span",
        description="Copies a local drop to DESTINATION/span-<N>/ (N: --span, or the next "
        "number there; 1 in an empty bucket). Endpoint and credentials come from the AWS "
        "environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...).",
    )
    up.add_argument("destination", help="s3://BUCKET/path (or gs://BUCKET/path)")
    up.add_argument("--dataset", default=DEFAULT_DATASET, choices=dataset_names())
    up.add_argument("--source-root", help="local dataset folder (default: the dataset's)")
    up.add_argument("--source-span", type=int, help="local span to copy (default: the latest)")
    up.add_argument("--span", type=int, help="span number in the bucket (default: next free)")
    add_storage_flags(up)
    up.add_argument(
        "--create-bucket",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="create a missing s3:// bucket (default: yes; `tfxp run` never creates buckets)",
    )
    up.set_defaults(func=cmd_upload)
