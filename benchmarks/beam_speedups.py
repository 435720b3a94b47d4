"""What runtime/beam_speedups.py saves: the same run with Beam's own DoFn
introspection, options parsing, pickler submodule scan and argument names, and with the four
caches, in one process.

    .venv/bin/python benchmarks/beam_speedups.py [--rows 3000] [--repeat 2] [--no-warmup]

Makes a span of the embedded taxi CSV's first `--rows` rows, runs the pipeline
once to warm up (imports, first TensorFlow traces; not counted), then
`--repeat` times each way, alternating (without, with, without, ...), every
run with `--no-cache` on the same store so each executes every component. Prints
each way's best wall time per component and in all, and the ratio with/without.
`--no-warmup` skips the warm-up, for smoke runs whose numbers do not matter (the
first measured run, without the caches, then pays for the imports and traces).
The anchor here is stock Beam (this project without the cache), not TFX's example:
`make bench` compares against that.
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.config import PROJECT_ROOT, PipelineConfig
from pipeline.datasets import dataset_config

EMBEDDED_CSV = PROJECT_ROOT / "data" / "taxi" / "span-1" / "data.csv"


def _span(data_root: Path, rows: int) -> None:
    (data_root / "span-1").mkdir(parents=True)
    with EMBEDDED_CSV.open() as src, (data_root / "span-1" / "data.csv").open("w") as dst:
        dst.writelines(itertools.islice(src, rows + 1))


def _timed_run(config: PipelineConfig, to_nodes: list[str]) -> dict[str, float]:
    from tfxp.local.runner import run_local

    started = time.perf_counter()
    summary = run_local(config, to_nodes=to_nodes, printer=lambda _: None)
    times = {c.node_id: c.seconds for c in summary.components if c.seconds}
    times["whole run"] = time.perf_counter() - started
    return times


def measure(
    rows: int, repeat: int, work: Path, to_nodes: list[str], warmup: bool = True
) -> dict[str, dict]:
    from runtime import beam_speedups

    install = beam_speedups.install
    install()
    # The runner installs the caches at every run: a no-op while measuring without them.
    beam_speedups.install = lambda: None
    _span(work / "data", rows)
    config = dataset_config("taxi").replace(
        data_root=str(work / "data"), run_dir=str(work / "run"), train_steps=40, eval_steps=2
    )
    if warmup:
        print(f"[warm-up] {rows:,} rows", flush=True)
        _timed_run(config, to_nodes)
    best: dict[str, dict[str, float]] = {"without cache": {}, "with cache": {}}
    for i in range(repeat * 2):
        way = "without cache" if i % 2 == 0 else "with cache"
        (beam_speedups.uninstall if way == "without cache" else install)()
        times = _timed_run(config.replace(enable_cache=False), to_nodes)
        print(f"[{way}] {times['whole run']:.1f} s", flush=True)
        for name, seconds in times.items():
            best[way][name] = min(seconds, best[way].get(name, float("inf")))
    install()
    beam_speedups.install = install
    return best


def report(best: dict[str, dict[str, float]]) -> str:
    without, with_ = best["without cache"], best["with cache"]
    lines = [f"{'':34} {'without':>9} {'with':>9} {'ratio':>7}"]
    for name in [n for n in without if n != "whole run"] + ["whole run"]:
        if name in with_:
            a, b = without[name], with_[name]
            lines.append(f"{name:34} {a:8.1f}s {b:8.1f}s {b / a:7.2f}")
    lines.append(
        f"ratio with / without the caches, whole run: {with_['whole run'] / without['whole run']:.2f}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rows", type=int, default=3000)
    p.add_argument("--repeat", type=int, default=2, help="runs each way (best is reported)")
    p.add_argument("--to-node", action="append", default=[], help="stop after this component")
    p.add_argument("--work", help="working folder (default: a temp dir, removed after)")
    p.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="skip the uncounted warm-up run (smoke runs: the first measured run pays for it)",
    )
    args = p.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="beam-speedups-"))
    try:
        print(report(measure(args.rows, args.repeat, work, args.to_node, args.warmup)))
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    from tfxp.cli import exit_now  # skips TensorFlow's teardown (~2 s of CPU)

    exit_now(main() or 0)
