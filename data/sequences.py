"""Event tables for the sequence pipeline: shopping sessions, one row per event.

`tfxp data generate sequences OUT --keys N [--seed S] [--files F]` writes
OUT/events-000.csv ... with the columns

  session_id   the sequence key ("s0000042")
  event_time   the order column, an ISO timestamp string ("2026-03-01 10:15:30")
  action       per event, categorical (view, search, cart, remove, purchase)
  amount       per event, numeric, blank for ~3% of events
  dwell_s      per event, integer seconds on the page
  device       per session, repeated on each of its rows (mobile, desktop, tablet)
  tenure_days  per session, numeric, repeated
  converted    per session, the label (yes / no), repeated

Sessions have 3 to 60 events; each session's rows are spread over the files and
every file is shuffled, so nothing can rely on rows arriving grouped or in order.

The label depends on order and on the *late* events: a session converts when a
`cart` happens among its last four events with no `remove` after it, and the
amounts of its last three events rise above its earlier ones. A model blind to
order (counts, means, first/last of each column) sees the same totals for a
session whose carts came early as for one whose carts came late, so it cannot
get it right; 5% of labels are flipped, so no model is perfect.
"""

from __future__ import annotations

import argparse
import csv
import math
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

COLUMNS = (
    "session_id",
    "event_time",
    "action",
    "amount",
    "dwell_s",
    "device",
    "tenure_days",
    "converted",
)
KEY, ORDER, LABEL = "session_id", "event_time", "converted"
ACTIONS = ("view", "search", "cart", "remove", "purchase")
ACTION_P = (0.5, 0.2, 0.15, 0.08, 0.07)
DEVICES = ("mobile", "desktop", "tablet")
MIN_EVENTS, MAX_EVENTS = 3, 60
LATE_EVENTS = 4  # a cart among the last LATE_EVENTS events counts
FLIP = 0.05
EPOCH = datetime(2026, 3, 1)


@dataclass(frozen=True)
class Session:
    key: str
    times: list[str]
    actions: list[str]
    amounts: list[str]
    dwell: list[int]
    device: str
    tenure: float
    label: str


def converts(actions: list[str], amounts: list[float]) -> bool:
    """The rule before noise: a late cart not undone, and rising late amounts."""
    late = actions[-LATE_EVENTS:]
    carted = "cart" in late and "remove" not in late[late.index("cart") :]
    seen = [a for a in amounts if not np.isnan(a)]
    rising = len(seen) > 3 and np.mean(seen[-3:]) > np.mean(seen[:-3])
    return carted and rising


def session(i: int, rng: np.random.Generator) -> Session:
    length = int(min(MAX_EVENTS, MIN_EVENTS + rng.geometric(1 / 12)))
    actions = list(rng.choice(ACTIONS, size=length, p=ACTION_P))
    base = rng.gamma(2.0, 15.0)
    amounts = rng.normal(base, base * 0.3, size=length).clip(0.5)
    if rng.random() < 0.5:  # half the sessions climb towards their end
        amounts[-3:] *= rng.uniform(1.1, 1.8)
    missing = rng.random(length) < 0.03
    amounts[missing] = np.nan
    label = converts(actions, list(amounts))
    if rng.random() < FLIP:
        label = not label
    start = EPOCH + timedelta(seconds=int(rng.integers(0, 86400 * 60)))
    gaps = np.cumsum(rng.integers(1, 300, size=length))
    times = [(start + timedelta(seconds=int(g))).strftime("%Y-%m-%d %H:%M:%S") for g in gaps]
    return Session(
        key=f"s{i:07d}",
        times=times,
        actions=actions,
        amounts=["" if np.isnan(a) else f"{a:.2f}" for a in amounts],
        dwell=[int(d) for d in rng.integers(1, 600, size=length)],
        device=str(rng.choice(DEVICES, p=(0.6, 0.3, 0.1))),
        tenure=round(float(rng.exponential(300.0)), 1),
        label="yes" if label else "no",
    )


def sessions(keys: int, seed: int = 0) -> list[Session]:
    rng = np.random.default_rng(seed)
    return [session(i, rng) for i in range(keys)]


def rows_of(s: Session, keep: float = 1.0) -> list[list]:
    """The session's rows; `keep` < 1 keeps only that share of its first events (a
    tracker that stops sending late events: the drift the gate must catch)."""
    rows = [
        [s.key, t, a, m, d, s.device, s.tenure, s.label]
        for t, a, m, d in zip(s.times, s.actions, s.amounts, s.dwell, strict=True)
    ]
    return rows[: max(1, math.ceil(len(rows) * keep))]


def write_events(
    out: Path, keys: int, seed: int = 0, files: int = 3, progress=None, keep: float = 1.0
) -> dict:
    """The event table as `files` CSV files under `out`; returns counts for the caller."""
    if keys < 1 or files < 1:
        raise ValueError(f"--keys and --files must be at least 1 (got {keys}, {files})")
    if not 0 < keep <= 1:
        raise ValueError(f"--keep-events is a share in (0, 1], not {keep}")
    rng = np.random.default_rng(seed + 1)
    all_sessions = sessions(keys, seed)
    rows = [r for s in all_sessions for r in rows_of(s, keep)]
    order = rng.permutation(len(rows))  # rows of a key over every file, out of order
    out.mkdir(parents=True, exist_ok=True)
    chunk = -(-len(rows) // files)
    for f in range(files):
        with (out / f"events-{f:03d}.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            writer.writerows(rows[i] for i in order[f * chunk : (f + 1) * chunk])
        if progress:
            progress(f + 1, files)
    positive = sum(s.label == "yes" for s in all_sessions)
    return {"keys": keys, "events": len(rows), "files": files, "positive": positive}


def add_sequence_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keys", type=int, help="sequences: sessions to generate")
    p.add_argument("--files", type=int, default=3, help="sequences: CSV files (default 3)")
    p.add_argument(
        "--keep-events",
        type=float,
        default=1.0,
        help="sequences: keep only this share of each session's first events (drift)",
    )


def generate_sequences(args: argparse.Namespace, out: Path, stream=None) -> int:
    """The command: refuses a non-empty folder, writes into a hidden one, renames it in."""
    stream = stream or sys.stdout
    if not args.keys:
        print("ERROR: sequences need --keys N", file=sys.stderr)
        return 1
    if out.exists() and any(out.iterdir()):
        print(f"ERROR: {out} is not empty; choose a new folder", file=sys.stderr)
        return 1
    staging = out.parent / f".{out.name}.incomplete"
    shutil.rmtree(staging, ignore_errors=True)
    started = time.perf_counter()
    try:
        done = write_events(
            staging, args.keys, seed=args.seed, files=args.files, keep=args.keep_events
        )
    except (ValueError, OSError) as e:
        shutil.rmtree(staging, ignore_errors=True)
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    if out.exists():
        out.rmdir()
    staging.rename(out)
    print(
        f"wrote {done['events']:,} events of {done['keys']:,} sessions "
        f"({done['positive'] / done['keys']:.1%} converted) in {done['files']} file(s) to {out} "
        f"in {time.perf_counter() - started:.1f}s",
        file=stream,
    )
    print(
        f"next: tfxp init NAME --csv {out}/*.csv --label {LABEL} --sequence-key {KEY} "
        f"--order-by {ORDER}",
        file=stream,
    )
    return 0
