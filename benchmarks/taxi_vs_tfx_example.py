"""Benchmark: our pipeline vs TFX's own Chicago taxi native-Keras example, on the same data.

What it measures, in one invocation:

* ours: ``local_runner.py --run-dir <workdir>/ours --json`` on the embedded taxi data
  (``data/taxi/span-1/data.csv``, byte-identical to the example's ``data/simple/data.csv``).
* the example: ``tfx/examples/chicago_taxi_pipeline/taxi_pipeline_native_keras.py`` as shipped
  in the installed TFX, with its module file ``taxi_utils_native_keras.py``, its data and its
  own settings (Beam args, 1000 train steps, ...), run under ``LocalDagRunner`` instead of the
  ``BeamDagRunner`` its ``__main__`` uses. It is the anchor: nothing about it is tuned.
* the example in-process, two ways: with ``beam_pipeline_args=[]`` (Beam's default runner),
  and with the FnApiRunner named as ours names it (``--runner=FnApiRunner`` plus an empty
  ``--requirements_file``: given any Beam argument, TFX builds an sdist of tfx per Beam
  component unless a dependency flag is among them). The shipped Beam arguments
  (``--direct_running_mode=multi_processing``, ``--direct_num_workers=0``) make TFX build an
  sdist of tfx per Beam component and start worker processes; ours runs Beam in-process, so
  the in-process runs are the like-for-like comparison, and the headline is the faster of
  the two (the example's best configuration). Beam's default DirectRunner first tries to
  download and start its Prism runner for every pipeline (~2 CPU-s each where that fails,
  as offline here), which naming the FnApiRunner skips.

Both examples must evaluate the same eval data as ours (the Evaluator's example_count is
printed for each and checked equal) and the training examples seen (steps x batch) are
printed for each side. The example is driven through its private names
(``_create_pipeline``, ``_pipeline_name``, ``_beam_pipeline_args``) and its run_fn's batch
size; if a TFX release changes them, the benchmark stops at once and says what changed.

Each run is a separate subprocess with fresh directories (so nothing is cached) and
``TF_CPP_MIN_LOG_LEVEL=3``. Timings are wall-clock seconds of the *whole process*, Python and
TensorFlow imports included: what a user waits for. Quality is the Evaluator's overall-slice
``binary_accuracy`` of each run, plus whether the Evaluator blessed the model.

Targets: ours/example-in-process wall time <= 0.40, and ours' binary_accuracy >= the example's.
This is a benchmark, not a test: a missed target is reported, not failed. The exit status is
non-zero only when a run fails (the tail of its log is printed).

Run it (from any folder; it takes a few minutes)::

    .venv/bin/python benchmarks/taxi_vs_tfx_example.py [--order example-first] [--json] [--keep]
        [--timeout SECONDS] [--check-example]

``--check-example`` only checks that the installed example still has the names this
benchmark drives (seconds; CI's smoke test runs it).

Timings on a shared machine are noisy; run it more than once before reading much into a few
seconds' difference.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from record import last_json_object  # noqa: E402  (the sibling that keeps results)

# The benchmark's parts (benchmarks/taxi_example/), re-exported here: scale.py,
# digits_vs_tfx_mnist.py and the tests use them as this module's names.
from taxi_example import example as _example  # noqa: E402
from taxi_example.example import (  # noqa: E402, F401
    ANCHORS,
    EXAMPLE_BATCH,
    EXAMPLE_MODULE,
    EXAMPLE_NAMES,
    EXAMPLE_PIPELINE,
    EXAMPLE_REL_DIR,
    IN_PROCESS_ANCHORS,
    _anchor_beam_args,
    _custom_property,
    _drive_example,
    _example_paths,
    _quiet_tf,
    _read_example_results,
    _tfx_dir,
    _trainer_settings,
    missing_names,
    prepare_example,
    read_example_results,
)
from taxi_example.measure import (  # noqa: E402, F401
    LOG_TAIL_LINES,
    RUN_TIMEOUT,
    PeakRss,
    RunResult,
    _fresh_dir,
    _print_failure,
    _process_name,
    _run_timed,
    _subprocess_env,
    _tail,
    driver_peaks,
)
from taxi_example.report import (  # noqa: E402, F401
    ANCHOR_LABELS,
    WALL_RATIO_TARGET,
    _eval_count,
    _examples_seen,
    _fmt,
    _verdict,
    compare,
    render,
)


def check_example() -> int:
    """The example's training batch size; exits with a clear message if the example changed.

    Looks the installed TFX up through this module's `_tfx_dir`, so that a caller (a test)
    that replaces it here checks another folder.
    """
    return _example.check_example(_tfx_dir())


# --------------------------------------------------------------------------- our pipeline


def run_ours(
    workdir: Path,
    timeout: float = RUN_TIMEOUT,
    extra_args: tuple[str, ...] = (),
    hyperparameters: Any = None,
) -> RunResult:
    """Our pipeline in a subprocess; `extra_args` go to local_runner.py (e.g. --data-root).

    `hyperparameters`: the trainer's hyperparameters class, which knows its batch size
    (default: trainer.base.Hyperparameters, the tabular trainers').
    """
    run_dir = workdir / "ours"  # created by the pipeline itself; must not exist yet
    if run_dir.exists():
        raise SystemExit(f"{run_dir} already exists; runs need fresh directories (no caching)")
    cmd = [sys.executable, "local_runner.py", "--run-dir", str(run_dir), "--json", *extra_args]
    result = _run_timed("ours", cmd, REPO_ROOT, workdir, timeout, run_logs=run_dir / "logs")
    if result.returncode != 0:
        return result
    summary = last_json_object(Path(result.stdout_log).read_text(errors="replace"))
    if summary is None:
        raise SystemExit(f"ours: no JSON summary found in {result.stdout_log}")
    metrics = summary.get("metrics") or {}
    accuracy = metrics.get("binary_accuracy")
    result.binary_accuracy = float(accuracy) if isinstance(accuracy, int | float) else None
    result.blessed = summary.get("blessed")
    result.pushed = summary.get("pushed")
    result.components = [
        {"node_id": c["node_id"], "state": c["state"], "seconds": c["seconds"]}
        for c in summary.get("components", [])
    ]
    result.extra.update(
        run_id=summary.get("run_id"),
        pipeline_wall_seconds=summary.get("wall_seconds"),
        metrics=metrics,
        pushed_model=summary.get("pushed_model"),
    )
    with _quiet_tf():
        steps, custom = _trainer_settings(run_dir / "metadata.sqlite")
        if hyperparameters is None:
            from trainer.base import Hyperparameters

            hyperparameters = Hyperparameters
        batch = hyperparameters.from_custom_config(custom).batch_size
    result.extra.update(train_steps=steps, train_batch=batch)
    return result


def run_example(
    workdir: Path,
    timeout: float = RUN_TIMEOUT,
    anchor: str = "example",
    data_files: list[Path] | None = None,
) -> RunResult:
    if anchor not in ANCHORS:
        raise ValueError(f"unknown anchor {anchor!r}; one of {', '.join(ANCHORS)}")
    example_dir = workdir / anchor
    prepare_example(example_dir, data_files)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_run-example", str(example_dir)]
    cmd += ["--_anchor", anchor]
    return _run_timed(anchor, cmd, example_dir, workdir, timeout)


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Wall time and accuracy of our pipeline vs TFX's Chicago taxi example."
    )
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, runs)")
    parser.add_argument(
        "--order",
        choices=("ours-first", "example-first"),
        default="ours-first",
        help="which pipeline runs first (default: ours-first)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where runs and logs go (default: a new temp dir); its ours/ and example/ must "
        "not exist yet. A given --workdir is never deleted.",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=RUN_TIMEOUT,
        help=f"seconds each pipeline process may take before it is killed (default {RUN_TIMEOUT:.0f})",
    )
    parser.add_argument(
        "--check-example",
        action="store_true",
        help="only check that TFX's installed example still has what this benchmark drives",
    )
    # Internal: the subprocess that runs TFX's example.
    parser.add_argument("--_run-example", dest="run_example", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_anchor", dest="anchor", default="example", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.run_example is not None:
        return _drive_example(args.run_example.resolve(), anchor=args.anchor)
    batch = check_example()  # before minutes of runs, not after
    if args.check_example:
        print(f"TFX's taxi example: {', '.join(EXAMPLE_NAMES)} present; training batch {batch}")
        return 0

    if args.workdir is not None:
        workdir = args.workdir.resolve()
        workdir.mkdir(parents=True, exist_ok=True)
        remove_after = False
    else:
        workdir = Path(tempfile.mkdtemp(prefix="taxi-vs-tfx-example-"))
        remove_after = not args.keep
    print(f"work dir: {workdir}", flush=True)
    for name in ("ours", *ANCHORS):
        if (workdir / name).exists():
            raise SystemExit(f"{workdir / name} already exists; runs need fresh directories")

    names = ["ours", *ANCHORS] if args.order == "ours-first" else [*ANCHORS, "ours"]
    results: dict[str, RunResult] = {}
    for name in names:
        if name == "ours":
            result = run_ours(workdir, args.timeout)
        else:
            result = run_example(workdir, args.timeout, anchor=name)
        results[name] = result
        if result.returncode != 0:
            _print_failure(result)
            print(f"work dir kept: {workdir}", file=sys.stderr)
            return 1

    ours = results["ours"]
    anchors = {name: results[name] for name in ANCHORS}
    for name, anchor in anchors.items():
        try:
            read_example_results(anchor, workdir / name)
        except Exception as e:  # noqa: BLE001 - keep the timings even if the example's outputs are unreadable
            print(f"warning: could not read {name}'s results: {e!r}", file=sys.stderr)
    verdict = compare(ours, anchors)
    print(render(ours, anchors, verdict, args.order))
    if args.json:
        payload = {
            "order": args.order,
            "workdir": str(workdir),
            "ours": asdict(ours),
            **{name: asdict(anchor) for name, anchor in anchors.items()},
            **verdict,
        }
        print(json.dumps(payload, indent=2, sort_keys=True))

    if remove_after:
        shutil.rmtree(workdir, ignore_errors=True)
        print(f"\nwork dir removed (use --keep to keep it): {workdir}")
    else:
        print(f"\nwork dir kept: {workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
