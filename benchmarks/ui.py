"""The console's speed over a store of many runs: server time of the runs page and a run page.

    .venv/bin/python benchmarks/ui.py [--runs 1000] [--requests 40] [--work DIR] [--json FILE]

Writes a SQLite ML Metadata store of --runs runs shaped as LocalDagRunner
records them (benchmarks/support/ui_store.py: contexts pipeline/pipeline_run/node, seven
executions with their events and artifacts per run, every third run a cached
rerun), then asks the app (in process, Starlette's TestClient) for

  runs page     /            the newest 50 runs (one page)
  run page      /run?...     a run in the middle: graph, gate, components
  first page    /            the first page after start: every run read once
  after a run   /            the first page after another run wrote to the
                             store: only what changed is read
  compare, datasets          once each, cold: pages that read every run

--requests times each, and prints p50/p95 of the server time the app reports
(its Server-Timing header). The anchor is what `tfxp runs list` does for the
same store: open it, read every run (Lineage(...).list_runs()); the ratio says
how much less the paged, cached page costs. The target is p95 < 300 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(
    0, str(ROOT / "benchmarks" / "support")
)  # the synthetic run writer (the console's tests use it too)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

TARGET_MS = 300.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(client, url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        answer = client.get(url)
        assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
        out.append(float(answer.headers["server-timing"].split("dur=")[1]))
    return out


def _commit() -> str:
    import subprocess

    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return found.stdout.strip() or "unknown"


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--work", help="folder for the store (default: a temp folder)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the figures as one JSON object at the end (benchmarks/record.py keeps it)",
    )
    return parser.parse_args()


def _write_store(work: Path, runs: int) -> Path:
    """`runs` runs written to a fresh metadata.sqlite in `work`; its path."""
    import ui_store

    store_path = work / "metadata.sqlite"
    if store_path.exists():
        store_path.unlink()
    started = time.perf_counter()
    print(f"writing {runs} runs to {store_path} ...", flush=True)
    # Written in memory (/dev/shm: no fsync per execution), then copied: the pages
    # are measured on a store on disk, as a user's run directory is.
    scratch = Path(tempfile.mkdtemp(dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    ui_store.write_runs(scratch / "metadata.sqlite", runs, root=work)
    shutil.copyfile(scratch / "metadata.sqlite", store_path)
    shutil.rmtree(scratch)
    print(f"  written in {time.perf_counter() - started:.1f} s", flush=True)
    return store_path


def _measure(work: Path, store_path: Path, runs: int, requests: int) -> dict:
    """The anchor's read of every run, then each page's server time (ms)."""
    import ui_store
    from starlette.testclient import TestClient

    from metadata.lineage import Lineage
    from metadata.store import location_from, open_store
    from tfxp.ui.app import create_app
    from tfxp.ui.browse import StoreBrowser

    location = location_from(run_dir=str(work))
    t = time.perf_counter()
    Lineage(open_store(location), "taxi").list_runs()
    anchor_ms = (time.perf_counter() - t) * 1000

    browser = StoreBrowser(location)
    client = TestClient(create_app(browser), base_url="http://127.0.0.1")
    first = timed(client, "/", 1)[0]
    run_url = f"/run?pipeline=taxi&id=run-{runs // 2:05d}"
    results = {}
    for name, url in (
        ("runs page", "/"),
        ("run page", run_url),
        ("runs page, page 10", "/?page=10"),
    ):
        ms = timed(client, url, requests)
        results[name] = {"p50_ms": percentile(ms, 0.5), "p95_ms": percentile(ms, 0.95)}
    # Once each, cold: pages that read every run (TFMA imported first, as `tfxp ui`
    # does at start, so its import is not counted).
    import tensorflow_model_analysis  # noqa: F401

    once = {
        name: timed(client, url, 1)[0]
        for name, url in (
            ("compare page", f"/compare?pipeline=taxi&a=run-00000&b=run-{runs - 1:05d}"),
            ("datasets page", "/datasets"),
        )
    }
    # Another run writes: the next page reads what it changed.
    ui_store.Writer(ui_store.open_sqlite(store_path), work).run("run-extra")
    after_write = timed(client, "/", 1)[0]
    return {
        "pages": results,
        "first_page_ms": first,
        "after_write_ms": after_write,
        "once_ms": once,
        "anchor_runs_list_ms": anchor_ms,
    }


def _print_report(figures: dict, runs: int, requests: int) -> float:
    """Prints the figures against the target; returns the anchor / runs page p95 ratio."""
    print(f"\n{runs} runs, {requests} requests each (server time, Server-Timing):")
    for name, r in figures["pages"].items():
        verdict = "under" if r["p95_ms"] < TARGET_MS else "OVER"
        print(
            f"  {name:<20} p50 {r['p50_ms']:7.1f} ms   p95 {r['p95_ms']:7.1f} ms   ({verdict} {TARGET_MS:.0f} ms)"
        )
    print(
        f"  first runs page        {figures['first_page_ms']:7.1f} ms (opens the store, reads every run once)"
    )
    print(
        f"  runs page after a run  {figures['after_write_ms']:7.1f} ms (the store changed: what changed read)"
    )
    for name, ms in figures["once_ms"].items():
        print(f"  {name:<22} {ms:7.1f} ms (once, cold: reads every run)")
    anchor_ms = figures["anchor_runs_list_ms"]
    print(f"  anchor: `tfxp runs list`'s reading of all runs: {anchor_ms:.1f} ms")
    ratio = anchor_ms / figures["pages"]["runs page"]["p95_ms"]
    print(f"  ratio anchor / runs page p95: {ratio:.1f}x")
    return ratio


def main() -> int:
    args = _parse_args()
    import warnings

    warnings.filterwarnings("ignore")
    work = Path(args.work or tempfile.mkdtemp(prefix="ui-bench-"))
    store_path = _write_store(work, args.runs)
    figures = _measure(work, store_path, args.runs, args.requests)
    ratio = _print_report(figures, args.runs, args.requests)
    if args.json:
        report = {
            "benchmark": "ui",
            "runs": args.runs,
            "requests": args.requests,
            **figures,
            "ratio": ratio,
            "target_p95_ms": TARGET_MS,
        }
        print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
