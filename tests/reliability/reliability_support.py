"""Helpers shared by the fault-injection tests (imported as a plain module)."""

from __future__ import annotations

import itertools
from pathlib import Path

from pipeline.config import PROJECT_ROOT

EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"


def write_sample(tmp: Path, rows: int = 2000) -> Path:
    """The embedded CSV's header and first `rows` rows as `tmp/data/span-1`; returns tmp/data."""
    span = tmp / "data" / "span-1"
    span.mkdir(parents=True)
    with EMBEDDED_CSV.open() as src, (span / "data.csv").open("w") as dst:
        dst.writelines(itertools.islice(src, rows + 1))
    return tmp / "data"
