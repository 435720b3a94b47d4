"""CSV header names as feature names: a header that is not a valid feature name is
renamed (the same way by `tfxp init`, `tfxp data add` and `tfxp predict`), and a
file's header row is rewritten in place of the old one."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

VALID_FEATURE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def feature_name(header: str) -> str:
    """A valid feature name for a CSV header: letters, digits and _, not starting with a digit.

    `tfxp init` renames such columns in the data and schema; `tfxp predict` maps a
    file's original header names to them.
    """
    name = re.sub(r"[^A-Za-z0-9_]+", "_", header.strip()).strip("_") or "column"
    return "c_" + name if name[0].isdigit() else name


def feature_header(header: list[str], columns: dict[str, str] | Any) -> list[str]:
    """A CSV header with original column names `tfxp init` renamed mapped to their feature names."""
    return [
        feature_name(h) if h.strip() not in columns and feature_name(h) in columns else h.strip()
        for h in header
    ]


def rename_header(path: str | os.PathLike, columns: dict[str, str]) -> bool:
    """Rewrites a CSV file's header in place with `feature_header`; True if it changed."""
    import csv
    import shutil

    path = Path(path)
    with path.open(newline="", encoding="utf-8") as f:
        header = next(csv.reader([f.readline()]), [])
        names = feature_header(header, columns)
        if names == [h.strip() for h in header]:
            return False
        tmp = path.with_name(path.name + ".renaming")
        with tmp.open("w", newline="", encoding="utf-8") as out:
            csv.writer(out, lineterminator="\n").writerow(names)
            shutil.copyfileobj(f, out)
    os.replace(tmp, path)
    return True
