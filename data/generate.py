"""Generates taxi-like CSV drops of any size, learned from the embedded data, with optional drift.

    python -m data.generate OUT_DIR --rows 1000000 [--seed 7] [--scale fare=1.5] ...
    tfxp data generate taxi --rows 1000000      (the same, published as the next span)

How rows are made. The embedded span (15,002 real trips) is the model: each
generated row combines three real rows drawn independently, one for *when*
(month, day, hour, timestamp), one for *where* (community areas, census tracts,
coordinates) and one for the *trip* (fare, miles, seconds, payment type,
company, tips). Within a group the joint distribution is the data's own, so
what matters for the label survives exactly: tips are scaled with the fare by
the same random factor (the tip ratio is kept) and the payment type comes from
the same trip (cash trips almost never record a tip). The trip's numbers are
smoothed by a log-normal factor (sigma 0.08), so values are new but the shapes,
ranges and null rates are the data's; categories keep their frequencies.

Memory is flat: rows are made and written in chunks of 100,000 with numpy,
and each chunk's generator is seeded by (seed, chunk index): the same seed
gives the same bytes.

Drift switches (each repeatable, COLUMN=VALUE):
  --shift fare=2.5        add to a numeric column (moves its mean)
  --scale trip_miles=1.5  multiply a numeric column (moves mean and spread)
  --nulls company=0.3     blank out this fraction of a column's values
  --unseen payment_type=0.05   replace this fraction with categories never seen
  --reweight payment_type=Cash:3   make a category this many times as frequent
Integer columns stay integers inside the schema's int domain and non-negative
columns stay non-negative, so a drifted drop still passes the CSV checks; the
drift is for StatisticsGen/ExampleValidator and drift detection to find.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PROJECT_ROOT = Path(__file__).resolve().parent.parent
EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"
SCHEMA_FILE = PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt"

CHUNK_ROWS = 100_000
ROWS_PER_FILE = 1_000_000
SMOOTH_SIGMA = 0.08

TIME = ("trip_start_month", "trip_start_hour", "trip_start_day", "trip_start_timestamp")
PLACE = (
    "pickup_community_area",
    "pickup_latitude",
    "pickup_longitude",
    "dropoff_latitude",
    "dropoff_longitude",
    "pickup_census_tract",
    "dropoff_census_tract",
    "dropoff_community_area",
)
TRIP = ("fare", "trip_miles", "trip_seconds", "payment_type", "company", "tips")
# Trip numbers smoothed by one shared factor per row (keeps fare/miles/seconds/tips ratios).
SMOOTHED = {"fare": 2, "trip_miles": 2, "tips": 2, "trip_seconds": 0}


@dataclass(frozen=True)
class Drift:
    shift: dict[str, float] = field(default_factory=dict)
    scale: dict[str, float] = field(default_factory=dict)
    nulls: dict[str, float] = field(default_factory=dict)
    unseen: dict[str, float] = field(default_factory=dict)
    reweight: dict[str, dict[str, float]] = field(default_factory=dict)

    def columns(self) -> set[str]:
        return set(self.shift) | set(self.scale) | set(self.nulls) | set(self.unseen)


@dataclass
class ColumnSpec:
    name: str
    kind: str  # INT, FLOAT, BYTES
    low: float | None = None
    high: float | None = None


def _schema_specs(path: Path) -> dict[str, ColumnSpec]:
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = text_format.Parse(path.read_text(), schema_pb2.Schema())
    specs = {}
    for f in schema.feature:
        spec = ColumnSpec(f.name, schema_pb2.FeatureType.Name(f.type))
        if f.HasField("int_domain"):
            d = f.int_domain
            spec.low = d.min if d.HasField("min") else None
            spec.high = d.max if d.HasField("max") else None
        elif f.HasField("float_domain"):
            d = f.float_domain
            spec.low = d.min if d.HasField("min") else None
            spec.high = d.max if d.HasField("max") else None
        specs[f.name] = spec
    return specs


class TaxiModel:
    """Column tokens and values of the source data, grouped for joint sampling."""

    def __init__(
        self,
        source: Path | Sequence[Path] = EMBEDDED_CSV,
        schema: Path = SCHEMA_FILE,
        *,
        whole_rows: bool = False,
    ) -> None:
        """`whole_rows`: any dataset's rows resampled whole (their joint distribution, the
        label's relation included), without the taxi groups or smoothing."""
        rows = []
        for path in [source] if isinstance(source, Path) else source:
            with Path(path).open(newline="") as f:
                reader = csv.reader(f)
                self.header = [h.strip() for h in next(reader)]
                rows += [r for r in reader if r]
        self.n = len(rows)
        self.specs = _schema_specs(schema)
        self.tokens: dict[str, np.ndarray] = {}
        self.values: dict[str, np.ndarray] = {}
        for i, name in enumerate(self.header):
            col = [_quote(r[i]) for r in rows]
            self.tokens[name] = np.array(col, dtype=object)
            if self.specs.get(name, ColumnSpec(name, "BYTES")).kind in ("INT", "FLOAT"):
                self.values[name] = np.array([float(c) if c else np.nan for c in col])
        self.decimals = {name: _decimals(self.tokens[name]) for name in self.values}
        self.smoothed = {} if whole_rows else SMOOTHED
        self.groups = [tuple(self.header)] if whole_rows else [TIME, PLACE, TRIP]
        grouped = {c for g in self.groups for c in g}
        # Columns of another dataset layout: drawn on their own.
        self.groups += [(c,) for c in self.header if c not in grouped]

    def kind(self, name: str) -> str:
        return self.specs[name].kind if name in self.specs else "BYTES"


def _quote(cell: str) -> str:
    if any(ch in cell for ch in ',"\n\r'):
        return '"' + cell.replace('"', '""') + '"'
    return cell


def _decimals(tokens: np.ndarray) -> int:
    counts = [len(t.split(".", 1)[1]) for t in tokens[:2000] if "." in t]
    return max(counts, default=0)


def _format(values: np.ndarray, decimals: int) -> np.ndarray:
    missing = np.isnan(values)
    if decimals == 0:
        safe = np.where(missing, 0, values).astype(np.int64)
        out = np.array(list(map(str, safe.tolist())), dtype=object)
    else:
        fmt = f"{{:.{decimals}f}}".format
        out = np.array(list(map(fmt, values.tolist())), dtype=object)
    out[missing] = ""
    return out


def _group_weights(model: TaxiModel, group: Sequence[str], drift: Drift) -> np.ndarray | None:
    weights = None
    for name in group:
        for category, factor in drift.reweight.get(name, {}).items():
            hit = model.tokens[name] == _quote(category)
            if not hit.any():
                raise ValueError(f"--reweight {name}: category {category!r} does not occur")
            if weights is None:
                weights = np.ones(model.n)
            weights[hit] *= factor
    if weights is None:
        return None
    return np.cumsum(weights / weights.sum())


def _check_drift(model: TaxiModel, drift: Drift) -> None:
    for name in drift.columns() | set(drift.reweight):
        if name not in model.tokens:
            raise ValueError(f"unknown column {name!r}; columns: {', '.join(model.header)}")
    for name in set(drift.shift) | set(drift.scale):
        if name not in model.values:
            raise ValueError(f"--shift/--scale {name}: not a numeric column")
    for name in drift.unseen:
        if model.kind(name) != "BYTES":
            raise ValueError(
                f"--unseen {name}: only text columns take new categories (an unseen integer "
                "would break the schema's type or domain); use --shift for numbers"
            )
    for name, frac in {**drift.nulls, **drift.unseen}.items():
        if not 0.0 <= frac <= 1.0:
            raise ValueError(f"{name}={frac}: a fraction must be within 0..1")


def make_chunk(
    model: TaxiModel, rows: int, rng: np.random.Generator, drift: Drift, cdfs: list
) -> list[np.ndarray]:
    """One chunk of generated columns (CSV-ready text cells) in header order."""
    out: dict[str, np.ndarray] = {}
    for group, cdf in zip(model.groups, cdfs, strict=True):
        if cdf is None:
            idx = rng.integers(0, model.n, size=rows)
        else:
            idx = np.minimum(np.searchsorted(cdf, rng.random(rows), side="right"), model.n - 1)
        factor = None
        if set(group) & set(model.smoothed):
            factor = np.exp(rng.normal(0.0, SMOOTH_SIGMA, size=rows))
        for name in group:
            if name not in model.tokens:
                continue
            numeric = None
            if factor is not None and name in model.smoothed:
                numeric = model.values[name][idx] * factor
                decimals = model.smoothed[name]
            elif name in drift.shift or name in drift.scale:
                numeric = model.values[name][idx].copy()
                decimals = model.decimals[name]
            if numeric is not None:
                if name in drift.scale:
                    numeric *= drift.scale[name]
                if name in drift.shift:
                    numeric += drift.shift[name]
                numeric = _fit_domain(numeric, model.specs.get(name), decimals)
                out[name] = _format(numeric, decimals if model.kind(name) == "FLOAT" else 0)
            else:
                out[name] = model.tokens[name][idx]
    for name, frac in drift.unseen.items():
        hit = rng.random(rows) < frac
        fresh = np.array([f"unseen-{name}-{i}" for i in range(1, 6)], dtype=object)
        out[name] = out[name].copy()
        out[name][hit] = fresh[rng.integers(0, len(fresh), size=int(hit.sum()))]
    for name, frac in drift.nulls.items():
        hit = rng.random(rows) < frac
        out[name] = out[name].copy()
        out[name][hit] = ""
    return [out[name] for name in model.header]


def _fit_domain(values: np.ndarray, spec: ColumnSpec | None, decimals: int) -> np.ndarray:
    values = np.round(values, decimals if spec is None or spec.kind == "FLOAT" else 0)
    if spec is not None:
        low = spec.low
        if low is None and spec.kind in ("INT", "FLOAT") and spec.name in SMOOTHED:
            low = 0.0
        if low is not None or spec.high is not None:
            values = np.clip(values, low, spec.high)
    return values


def generate(
    out_dir: str | Path,
    rows: int,
    *,
    seed: int = 0,
    drift: Drift | None = None,
    rows_per_file: int = ROWS_PER_FILE,
    model: TaxiModel | None = None,
    progress=None,
) -> list[Path]:
    """Writes `rows` generated rows as `part-NNNNN.csv` files into `out_dir`; returns them."""
    if rows < 1:
        raise ValueError("--rows must be at least 1")
    drift = drift or Drift()
    model = model or TaxiModel()
    _check_drift(model, drift)
    cdfs = [_group_weights(model, g, drift) for g in model.groups]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    header = ",".join(model.header) + "\n"
    files: list[Path] = []
    written = 0
    chunk_index = 0
    handle = None
    in_file = rows_per_file
    try:
        while written < rows:
            if in_file >= rows_per_file:
                if handle:
                    handle.close()
                path = out / f"part-{len(files):05d}.csv"
                files.append(path)
                handle = path.open("w", newline="")
                handle.write(header)
                in_file = 0
            # Chunks never cross files, so a chunk's rows depend on (seed, chunk index) only.
            n = min(CHUNK_ROWS, rows - written, rows_per_file - in_file)
            rng = np.random.default_rng([seed, chunk_index])
            columns = make_chunk(model, n, rng, drift, cdfs)
            lists = [c.tolist() for c in columns]
            handle.write("\n".join(map(",".join, zip(*lists, strict=True))))
            handle.write("\n")
            written += n
            in_file += n
            chunk_index += 1
            if progress:
                progress(written, rows)
    finally:
        if handle:
            handle.close()
    return files


def _pairs(items: Sequence[str] | None, flag: str) -> dict[str, float]:
    result = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        try:
            result[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise SystemExit(f"{flag} {item!r}: expected COLUMN=NUMBER")
    return result


def _reweights(items: Sequence[str] | None) -> dict[str, dict[str, float]]:
    result: dict[str, dict[str, float]] = {}
    for item in items or ():
        name, _, rest = item.partition("=")
        category, _, factor = rest.rpartition(":")
        try:
            result.setdefault(name.strip(), {})[category] = float(factor)
        except ValueError:
            raise SystemExit(f"--reweight {item!r}: expected COLUMN=CATEGORY:FACTOR") from None
        if not category:
            raise SystemExit(f"--reweight {item!r}: expected COLUMN=CATEGORY:FACTOR")
    return result


def add_generate_flags(p: argparse.ArgumentParser, rows_required: bool = True) -> None:
    p.add_argument("--rows", type=int, required=rows_required, help="rows to generate (any size)")
    p.add_argument("--seed", type=int, default=0, help="same seed, same bytes (default 0)")
    p.add_argument("--rows-per-file", type=int, default=ROWS_PER_FILE)
    g = p.add_argument_group("drift (each repeatable)")
    g.add_argument("--shift", action="append", metavar="COL=DELTA", help="add to a numeric column")
    g.add_argument("--scale", action="append", metavar="COL=FACTOR", help="multiply a column")
    g.add_argument("--nulls", action="append", metavar="COL=FRAC", help="blank a fraction")
    g.add_argument(
        "--unseen", action="append", metavar="COL=FRAC", help="new categories for a fraction"
    )
    g.add_argument(
        "--reweight", action="append", metavar="COL=CAT:FACTOR", help="change a category's share"
    )


def drift_from_args(args: argparse.Namespace) -> Drift:
    return Drift(
        shift=_pairs(args.shift, "--shift"),
        scale=_pairs(args.scale, "--scale"),
        nulls=_pairs(args.nulls, "--nulls"),
        unseen=_pairs(args.unseen, "--unseen"),
        reweight=_reweights(args.reweight),
    )


def progress_printer(stream=sys.stderr):
    started = time.perf_counter()
    last = [0.0]

    def show(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] >= 2.0 or done == total:
            last[0] = now
            rate = done / max(now - started, 1e-9)
            print(f"  {done:,}/{total:,} rows ({rate:,.0f} rows/s)", file=stream, flush=True)

    return show


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m data.generate", description=__doc__.split("\n")[0])
    p.add_argument("out_dir", help="folder to write part-NNNNN.csv files into")
    add_generate_flags(p)
    args = p.parse_args(argv)
    try:
        started = time.perf_counter()
        files = generate(
            args.out_dir,
            args.rows,
            seed=args.seed,
            drift=drift_from_args(args),
            rows_per_file=args.rows_per_file,
            progress=progress_printer(),
        )
    except ValueError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    took = time.perf_counter() - started
    print(f"wrote {args.rows:,} rows in {len(files)} file(s) to {args.out_dir} in {took:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
