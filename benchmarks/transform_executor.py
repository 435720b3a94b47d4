"""Transform alone: TFX's executor against the fast path (components/fast/transform/), same inputs.

    .venv/bin/python benchmarks/transform_executor.py --rows 200000 [--repeat 2] [--json]

Generates `--rows` taxi rows (`tfxp data generate`), runs the pipeline up to
Transform once (it makes Transform's inputs: the examples and the schema), then
reruns that Transform execution, from its inputs and exec properties in ML
Metadata, `--repeat` times with each executor, alternating (TFX, fast, TFX,
...). Each run is a fresh process under the `--beam` mode, timed around
the executor's `Do` alone (imports excluded). Prints each executor's best time
and the ratio fast/TFX. `--run-dir` reuses a run instead of generating one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# A node's last execution's inputs and properties, and TFX's Transform run on them
# (benchmarks/support/, shared with the tests that compare the executors).
sys.path.insert(0, str(ROOT / "benchmarks" / "support"))

EXECUTORS = {
    "tfx": "tfx.components.transform.executor.Executor",
    "fast": "components.fast.transform.executor.Executor",
}


def _one(executor: str, metadata_path: str, out: str, beam: str) -> None:
    """In a child process: one executor once; prints its seconds as JSON."""
    import importlib

    from absl import logging
    from evaluator_runs import evaluator_inputs, run_transform

    from pipeline.beam import BeamOptions, beam_args

    module, name = EXECUTORS[executor].rsplit(".", 1)
    executor_class = getattr(importlib.import_module(module), name)
    run = SimpleNamespace(metadata_path=metadata_path)
    inputs, properties, _ = evaluator_inputs(run, node="Transform")
    logging.set_verbosity(logging.INFO)  # the fast path's split of its time
    started = time.perf_counter()
    args = beam_args(BeamOptions(mode=beam, setup_file=str(ROOT / "setup.py")))
    run_transform(executor_class, inputs, properties, Path(out), args)
    print(json.dumps({"seconds": time.perf_counter() - started}))


def _timed(executor: str, metadata_path: Path, out: Path, beam: str) -> tuple[float, str]:
    done = subprocess.run(
        [sys.executable, __file__, "--one", executor, "--metadata", str(metadata_path)]
        + ["--out", str(out), "--beam", beam],
        check=True,
        capture_output=True,
        text=True,
    )
    seconds = json.loads(done.stdout.strip().splitlines()[-1])["seconds"]
    split = [line for line in done.stderr.splitlines() if "Transform: analysis" in line]
    return seconds, split[-1].split("Transform: ", 1)[1] if split else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--run-dir", help="a run whose Transform to repeat (skips generating)")
    parser.add_argument(
        "--beam",
        choices=("in-process", "multi-process"),
        default="in-process",
        help="Beam mode of both executors (`tfxp run --beam`)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", choices=sorted(EXECUTORS), help=argparse.SUPPRESS)
    parser.add_argument("--metadata", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        _one(args.one, args.metadata, args.out, args.beam)
        return
    with tempfile.TemporaryDirectory(prefix="transform-bench-") as tmp:
        work = Path(tmp)
        from evaluator_runs import prepared_run

        run = Path(args.run_dir) if args.run_dir else prepared_run(args.rows, work, "Transform")
        best: dict[str, float] = {}
        for i in range(args.repeat * 2):
            executor = ("tfx", "fast")[i % 2]
            seconds, split = _timed(executor, run / "metadata.sqlite", work / f"out-{i}", args.beam)
            print(f"[{executor}] {seconds:.1f} s {split}", flush=True)
            best[executor] = min(seconds, best.get(executor, float("inf")))
    ratio = best["fast"] / best["tfx"]
    print(
        f"Transform: TFX's executor {best['tfx']:.1f} s, fast path {best['fast']:.1f} s, "
        f"ratio {ratio:.2f}"
    )
    if args.json:
        result = {"rows": args.rows, "beam": args.beam, "seconds": best, "ratio": round(ratio, 3)}
        print(json.dumps(result))


if __name__ == "__main__":
    main()
