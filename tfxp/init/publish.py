"""`tfxp init`, step 4: check the files with ExampleGen's CSV rules, publish the data
as span 1 and write the dataset's files, each atomically (a failure leaves nothing
half-written)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from pipeline.config import PROJECT_ROOT
from pipeline.datasets import (
    DATASET_FILE,
    SCHEMA_FILE,
    VALIDATION_FILE,
)
from tfxp.init.dataset_file import dataset_yaml, validation_yaml
from tfxp.init.profile import Inferred, InitError


def _publish(files: list[Path], header: list[str], inferred: Inferred, data_root: str, link: bool):
    """Publishes the drop as span 1 with `tfxp data add`'s atomic publish (headers renamed)."""
    from tfxp.datasets.publish import copy_files, publish_span

    def fill(folder: Path) -> None:
        if link:
            for f in files:
                os.symlink(f.resolve(), folder / f.name)
        elif inferred.renamed:
            new_header = ",".join(inferred.renamed.get(h, h) for h in header) + "\n"
            for f in files:
                with f.open("rb") as src, (folder / f.name).open("wb") as dst:
                    src.readline()
                    dst.write(new_header.encode())
                    shutil.copyfileobj(src, dst)
        else:
            copy_files(files, folder)

    return publish_span(data_root, fill, columns=_checked_kinds(inferred, by_source=False))


def _checked_kinds(inferred: Inferred, by_source: bool) -> dict[str, str]:
    """Column -> type the CSV checks hold the files to. A label whose bad rows are dropped
    is checked as text: its unparseable cells are dropped rows, not errors (as in ExampleGen)."""
    kinds = {(c.source if by_source else c.name): c.kind for c in inferred.columns}
    if not inferred.keep_unlabelled:
        kinds[inferred.label.source if by_source else inferred.label.name] = "BYTES"
    return kinds


def check_csv(files: list[Path], inferred: Inferred) -> None:
    """The data's own CSV checks (ExampleGen's rules), with the inferred column types."""
    from components.example_gen.csv_checks import CsvInputError, check_csv_files

    types = _checked_kinds(inferred, by_source=True)
    try:
        check_csv_files([str(f) for f in files], types)
    except CsvInputError as e:
        raise InitError(str(e)) from e


def place_data(
    files: list[Path],
    header: list[str],
    inferred: Inferred,
    data_root: str,
    remote: bool,
    spans: list,
    link: bool,
) -> str:
    """Span 1 from the files, unless data_root already has spans; returns what was done."""
    if spans:
        # Spans already there (kept data, or a --force rerun) are the data: add nothing.
        return f"kept the {len(spans)} span(s) already in {data_root} (nothing copied)"
    if remote:
        from tfxp.storage.upload import upload_span

        done = upload_span([str(f) for f in files], data_root, span=1)
        return f"uploaded {len(done.uris)} file(s) to {data_root}/span-1/"
    span = _publish(files, header, inferred, data_root, link)
    how = "linked" if link else "copied"
    return f"{how} {len(span.files)} file(s) to {span.path}"


def write_dataset_files(
    name: str,
    target: Path,
    inferred: Inferred,
    schema,
    data_root: str,
    texts: tuple[str, str] | None = None,
):
    """schema.pbtxt, validation.yaml and dataset.yaml into `target` (`texts`: the last two's
    text when not a table's, e.g. a sequence dataset's, given the dataset file's data root).

    Written to a sibling folder first and then moved in, so a failure while writing
    (a full disk, a bad schema) leaves `target` as it was.
    """
    from google.protobuf import text_format

    default_root = str(PROJECT_ROOT / "data" / name)
    # The default data root is left out of dataset.yaml (the file reads data/NAME).
    relative = None if data_root == default_root else data_root
    incoming = target.parent / f".incoming-{name}-{uuid.uuid4().hex[:8]}"
    incoming.mkdir(parents=True)
    try:
        (incoming / SCHEMA_FILE).write_text(
            f"# Curated schema of {name!r}: inferred by TFDV from {inferred.rows} rows by `tfxp "
            "init`; edit it by hand.\n# Environments: TRAINING data carries the label "
            f"{inferred.label.name!r}; SERVING requests do not.\n"
            + text_format.MessageToString(schema)
        )
        validation, dataset = texts or (None, None)
        (incoming / VALIDATION_FILE).write_text(validation or validation_yaml(inferred))
        (incoming / DATASET_FILE).write_text(dataset or dataset_yaml(inferred, relative))
        target.mkdir(parents=True, exist_ok=True)
        for f in incoming.iterdir():
            os.replace(f, target / f.name)
    finally:
        shutil.rmtree(incoming, ignore_errors=True)
