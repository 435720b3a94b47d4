"""`tfxp init NAME --csv FILE... --label COLUMN`: a new dataset from CSV files, no code.

Writes, after every check has passed (a bad input writes nothing):
  data/NAME/span-1/            the CSV files, published like `tfxp data add` (atomic);
                               or, with --data-root, wherever the user keeps the spans
  schema/NAME/schema.pbtxt     TFDV-inferred from the data's statistics, TRAINING and
                               SERVING environments (the label absent in SERVING)
  schema/NAME/validation.yaml  the default drift/skew thresholds
  schema/NAME/dataset.yaml     label, task, feature treatments, Evaluator thresholds,
                               train steps and hyperparameters: the file the user edits
and prints what it inferred and the command to run next.

This module is the command: the name's checks, the order of the steps and what it
prints. The steps: tfxp/init/profile.py (read and infer), init_schema.py (the
schema), init_yaml.py (dataset.yaml and validation.yaml), init_publish.py (the CSV
checks, the data as span 1, the files written atomically).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.config import PROJECT_ROOT
from pipeline.datasets import (
    DATASET_FILE,
    NAME_RE,
    SCHEMA_FILE,
    VALIDATION_FILE,
    dataset_dirs,
    dataset_files,
)
from tfxp.init import inference as init_inference
from tfxp.init.dataset_file import INIT_MARK, model_choice
from tfxp.init.profile import Inferred, InitError, check_files, infer
from tfxp.init.publish import check_csv, place_data, write_dataset_files
from tfxp.init.schema import infer_schema


def _target_dir(name: str) -> Path:
    return dataset_dirs()[0] / name


def _check_target(name: str, force: bool) -> Path:
    """The name is usable and free (or, with --force, init's own); returns its folder."""
    if not NAME_RE.match(name):
        raise InitError(
            f"dataset name {name!r}: use lowercase letters, digits, - and _ (it names folders "
            "and the pipeline)"
        )
    existing = dataset_files().get(name)
    target = _target_dir(name)
    if (existing or (target / DATASET_FILE).exists()) and not force:
        where = existing.parent if existing else target
        raise InitError(
            f"dataset {name!r} exists ({where}); pick another name, or pass --force to rewrite "
            "its schema, validation.yaml and dataset.yaml (the data is never touched)"
        )
    # --force must not overwrite a dataset file someone wrote by hand.
    if existing and force and INIT_MARK not in existing.read_text(encoding="utf-8"):
        raise InitError(
            f"dataset {name!r} ({existing}) was not written by `tfxp init`: --force only "
            "rewrites init's own files; pick another name"
        )
    return target


def _print_renames(inferred: Inferred, out) -> None:
    for source, new in inferred.renamed.items():
        print(
            f"column {source!r} is not a valid feature name (letters, digits and _, not "
            f"starting with a digit): renamed to {new!r} in the data and the schema "
            "(`tfxp data add` and `tfxp predict` map the old name to it)",
            file=out,
        )


def render_table(inferred: Inferred) -> str:
    width = max(len("column"), *(len(c.name) for c in inferred.columns))
    lines = [f"  {'column':<{width}}  {'type':<6} {'treatment':<11} {'missing':>7}  note"]
    for c in inferred.columns:
        missing = f"{100 * c.missing / inferred.rows:.1f}%"
        treatment = c.treatment
        note = c.note
        if c is inferred.label:
            note = ", ".join(filter(None, [note, f"{inferred.task} label"]))
        elif c.treatment in ("date", "timestamp"):
            note = f"{note} -> year, month, weekday, day of year, {'hour, ' if c.treatment == 'timestamp' else ''}days since 1970"
        elif c.missing and c.treatment == "zscore":
            note = ", ".join(filter(None, [note, "blanks -> mean + is-missing indicator"]))
        lines.append(f"  {c.name:<{width}}  {c.kind:<6} {treatment:<11} {missing:>7}  {note}")
    return "\n".join(lines)


def _print_summary(name: str, target: Path, inferred: Inferred, published: str, out) -> None:
    print(f"dataset {name}: {inferred.rows} rows, {len(inferred.columns)} columns", file=out)
    print(render_table(inferred), file=out)
    for line in init_inference.summary_lines(inferred):
        print(line, file=out)
    if inferred.task == "regression":
        base = f"predicting the mean has RMSE {inferred.label_std:.4g}"
    else:
        base = f"{len(inferred.classes)} classes {inferred.classes[:10]}; the most frequent is {inferred.majority:.1%} of rows"
    print(f"task: {inferred.task} on {inferred.label.name!r} ({base})", file=out)
    print("model: {} ({})".format(*model_choice(inferred)), file=out)
    print(f"data: {published}", file=out)
    print(f"wrote {target / SCHEMA_FILE}", file=out)
    print(f"      {target / VALIDATION_FILE}", file=out)
    print(f"      {target / DATASET_FILE}   <- edit this, not code", file=out)
    print(f"next: tfxp run --dataset {name}", file=out)


def _data_root(args: argparse.Namespace, name: str) -> tuple[str, bool]:
    data_root = args.data_root or str(PROJECT_ROOT / "data" / name)
    remote = "://" in data_root
    return (data_root if remote else str(Path(data_root).resolve())), remote


def run_sequence_init(args: argparse.Namespace, target: Path, out) -> int:
    """An event table (--sequence-key, --order-by): tfxp/init/sequence.py."""
    from tfxp.init import sequence as init_sequence

    if not (args.sequence_key and args.order_by):
        raise InitError("an event table needs both --sequence-key and --order-by")
    name = args.name
    seq, files, header = init_sequence.infer_sequences(args, name)
    inferred = seq.table
    if args.link and inferred.renamed:
        raise InitError("--link: a link cannot rename the data's header; copy the files")
    data_root, remote = _data_root(args, name)
    model = args.sequence_model or "gru"
    # Every check before any write.
    check_csv(files, inferred)
    schema = init_sequence.infer_sequence_schema(seq, files, model)
    from pipeline.spans import list_spans

    spans = [] if remote else [s for s in list_spans(data_root) if s.files]
    _print_renames(inferred, out)
    published = place_data(files, header, inferred, data_root, remote, spans, args.link)
    relative = None if data_root == str(PROJECT_ROOT / "data" / name) else data_root
    texts = (init_sequence.validation_yaml(seq), init_sequence.dataset_yaml(seq, relative, model))
    write_dataset_files(name, target, inferred, schema, data_root, texts)
    lo, median, hi = seq.lengths
    print(
        f"dataset {name}: {inferred.rows} events in {seq.sequences} sequences of {lo} to {hi} "
        f"events (median {median}), {len(inferred.columns)} columns",
        file=out,
    )
    print(init_sequence.render_table(seq), file=out)
    print(
        f"sequence: key {seq.key.name!r}, ordered by {seq.order.name!r} ({seq.order_format}); "
        f"{len(seq.context)} context, {len(seq.features)} per-event feature(s); "
        f"max_length {seq.max_length} (keep_last)",
        file=out,
    )
    if inferred.task == "regression":
        base = f"predicting the mean has RMSE {inferred.label_std:.4g}"
    else:
        base = (
            f"{len(inferred.classes)} classes {inferred.classes[:10]}; the most frequent is "
            f"{seq.majority:.1%} of sequences"
        )
    print(f"task: {inferred.task} on {inferred.label.name!r} ({base})", file=out)
    print(f"model: {model} over masked steps + context (trainer/sequence)", file=out)
    print(f"data: {published}", file=out)
    print(f"wrote {target / SCHEMA_FILE}", file=out)
    print(f"      {target / VALIDATION_FILE}", file=out)
    print(f"      {target / DATASET_FILE}   <- edit this, not code", file=out)
    print(f"next: tfxp run --dataset {name}", file=out)
    return 0


def run_init(args: argparse.Namespace, out=None) -> int:
    # sys.stdout looked up per call, not bound at import: callers (and tests) redirect it.
    out = out or sys.stdout
    name = args.name
    target = _check_target(name, args.force)
    if getattr(args, "sequence_key", None) or getattr(args, "order_by", None):
        return run_sequence_init(args, target, out)
    files, header = check_files(args.csv)
    keep = getattr(args, "keep_unlabelled", False)
    inferred, arrays = infer(
        name, files, header, args.label, args.task, args.exclude or (), keep_unlabelled=keep
    )
    if args.link and inferred.renamed:
        raise InitError(
            f"--link: column names {sorted(inferred.renamed)} must be renamed in the data's "
            "header, which a link cannot do; copy the files (drop --link) or fix the header"
        )
    data_root = args.data_root or str(PROJECT_ROOT / "data" / name)
    remote = "://" in data_root
    if not remote:
        data_root = str(Path(data_root).resolve())
    # Every check before any write.
    check_csv(files, inferred)
    schema = infer_schema(inferred, arrays)

    from pipeline.spans import list_spans

    spans = [] if remote else [s for s in list_spans(data_root) if s.files]
    _print_renames(inferred, out)
    published = place_data(files, header, inferred, data_root, remote, spans, args.link)
    write_dataset_files(name, target, inferred, schema, data_root)
    _print_summary(name, target, inferred, published, out)
    return 0
