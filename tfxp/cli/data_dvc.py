"""`tfxp data add --dvc` and `tfxp data tag`: spans in and out of DVC repositories.

    tfxp data add taxi --dvc REPO --path data/trips.csv --rev v1
    tfxp data add trips [--rev v2]      (the dataset file's `source: {dvc, path, rev}`)
    tfxp data tag taxi 1 --tag v1-examples [--dvc REPO [--path DIR]]

The records go to ML Metadata (the run dir's metadata.sqlite, or --mysql-*):
`tfxp lineage model` shows them with the data, `tfxp run --data-version NAME`
trains on the span a name points at.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from metadata.store import MetadataStoreError
from pipeline.headers import rename_header
from pipeline.overrides import pipeline_config
from pipeline.spans import SpanError
from tfxp.cli.common import store_location

# Beam (under TFX's fileio, which the hashing uses) warns about crcmod at import
# although it uses google-crc32c instead.
logging.getLogger().addFilter(lambda r: not str(r.msg).startswith("crcmod package"))


def _config(args: argparse.Namespace):
    return pipeline_config(
        args.dataset,
        data_root=getattr(args, "data_root", None) or None,
        run_dir=getattr(args, "run_dir", None) or None,
    )


def cmd_add_dvc(args: argparse.Namespace) -> int:
    """A DVC revision's CSV file(s) as the next span, recorded with their origin."""
    from components.validation.schema_importer import load_schema, schema_column_types
    from tfxp.datasets.dvc import DvcError
    from tfxp.datasets.versions import add_from_dvc

    if args.files:
        print("ERROR: give CSV files or --dvc, not both", file=sys.stderr)
        return 2
    config = _config(args)
    source = config.data_source
    if not args.dvc and source is not None:  # the dataset file's `source:` block
        args.dvc, args.path = source.dvc, args.path or source.path
        args.rev = args.rev or source.rev
    if not args.path:
        print(
            "ERROR: --dvc needs --path (the file or folder inside the repository)", file=sys.stderr
        )
        return 2
    started = time.perf_counter()
    columns = schema_column_types(load_schema(config.schema_file))

    def renamed(folder) -> None:
        for f in folder.glob("*.csv"):  # original names of columns `tfxp init` renamed
            rename_header(f, columns)

    try:
        added = add_from_dvc(
            config, store_location(args, config.local_dir), args.dvc, args.path, args.rev, renamed
        )
    except (DvcError, SpanError, MetadataStoreError, ValueError) as e:
        print(f"ERROR: {e}\nnothing was added to {config.data_root}", file=sys.stderr)
        return 1
    o = added.origin
    where = f"{o.path}@{o.rev} of {o.repo} (commit {o.commit[:12]}, dvc md5 {o.dvc_md5})"
    if added.cached:
        print(
            f"span {added.span.span} already holds {where}, sha256 {added.content_sha256[:12]}: "
            f"nothing added (cache hit) at {added.span.path}"
        )
        return 0
    print(
        f"added span {added.span.span} from {where}: {len(added.span.files)} file(s), "
        f"{added.span.nbytes:,} bytes at {added.span.path} in {time.perf_counter() - started:.1f}s"
    )
    print(
        f"recorded in ML Metadata: DatasetSource #{added.source_id}, content sha256 "
        f"{added.content_sha256}"
    )
    print(f"next: `tfxp run --data-version {o.rev}` trains on it; `tfxp data list` shows it")
    return 0


def cmd_tag(args: argparse.Namespace) -> int:
    from tfxp.datasets.dvc import DvcError
    from tfxp.datasets.versions import tag_span

    if args.dvc is None and args.tag is None:
        print("ERROR: give --tag NAME, --dvc REPO, or both", file=sys.stderr)
        return 2
    config = _config(args)
    try:
        tagged = tag_span(
            config, store_location(args, config.local_dir), args.span, args.tag, args.dvc, args.path
        )
    except (DvcError, SpanError, MetadataStoreError, ValueError) as e:
        print(f"ERROR: {e}\nnothing was tagged", file=sys.stderr)
        return 1
    print(
        f"tagged span {tagged.span} (Examples #{tagged.examples_id}, raw sha256 "
        f"{tagged.content_sha256[:12]}) as {tagged.name}: DatasetSource #{tagged.source_id}"
    )
    p = tagged.published
    if p is not None:
        print(
            f"  DVC: {p.path} in {p.repo}, commit {p.commit[:12]}, git tag {p.tag}, md5 {p.dvc_md5}"
        )
        print(f"  {'pushed to ' + p.pushed_to if p.pushed_to else 'no DVC remote: not pushed'}")
    print(f"next: `tfxp run --data-version {tagged.name}` trains on exactly these bytes")
    return 0


def add_dvc_flags(add: argparse.ArgumentParser) -> None:
    g = add.add_argument_group("from a DVC repository (instead of FILES)")
    g.add_argument("--dvc", metavar="REPO", help="a DVC repository: local path or git URL")
    g.add_argument("--path", help="the CSV file or folder inside the repository")
    g.add_argument("--rev", help="a tag, branch or commit (default: HEAD, workspace clean)")


def register_tag(dsub: argparse._SubParsersAction, common, choices) -> None:
    tag = dsub.add_parser(
        "tag",
        help="name a span's ingested Examples; with --dvc, add their TFRecords to DVC and tag",
        description="Names the newest ingestion of SPAN (for `tfxp run --data-version`). "
        "With --dvc, its TFRecord shards and a manifest of their sha256 go to REPO/PATH "
        "(default <dataset>/span-<N>), added with DVC, committed, git-tagged and pushed to "
        "the repository's default remote when it has one.",
    )
    tag.add_argument("dataset", choices=choices)
    tag.add_argument("span", type=int)
    tag.add_argument("--tag", help="the name (default <dataset>-span-<N>)")
    tag.add_argument("--dvc", metavar="REPO", help="a local clone of a DVC repository")
    tag.add_argument("--path", help="folder inside REPO for the shards")
    common(tag)
    tag.set_defaults(func=cmd_tag)
