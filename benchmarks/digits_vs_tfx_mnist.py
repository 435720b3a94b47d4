"""Benchmark: our digits pipeline vs TFX's own MNIST native-Keras example, on the same images.

What it measures, in one invocation, round after round (``--rounds``, back to back):

* ours: ``local_runner.py --dataset digits --run-dir <workdir>/round-N/ours --json`` on the
  embedded 1,797 8x8 digit PNGs (``data/digits/span-1/<digit>/*.png``, dataset file
  ``schema/digits/dataset.yaml``).
* the example: ``tfx/examples/mnist/mnist_pipeline_native_keras.py`` as shipped in the
  installed TFX (ImportExampleGen, StatisticsGen, SchemaGen, ExampleValidator, Transform,
  Trainer with its 5000 steps of batch 40, Evaluator with its 0.8 accuracy threshold, Pusher),
  with its module file ``mnist_utils_native_keras.py`` and ``mnist_utils_native_keras_base.py``,
  run under ``LocalDagRunner`` instead of the ``BeamDagRunner`` its ``__main__`` uses. It is
  the anchor: nothing about it is tuned. Two edits to copies of its module files, each checked
  to apply exactly once: the model's ``input_shape=(784,)`` (28x28 MNIST) becomes ``(64,)``
  (8x8 digits), and the module file imports the copied base module instead of the installed
  one (TFX packages every ``.py`` next to the module file, so the copy is importable).
* its data: the same PNGs, converted outside the timing into what the example reads, TFRecords
  of ``tf.train.Example`` with ``image_floats`` (64 floats, the grey levels scaled into the
  [-0.5, 0.5] its preprocessing_fn's comment says MNIST's are in; its ``scale_by_min_max``
  maps the data's own min/max there anyway) and ``image_class`` (the digit).
* the example's configurations, as taxi_vs_tfx_example.py runs them: as shipped (its
  multi-processing Beam arguments), in-process (``beam_pipeline_args=[]``) and in-process with
  the FnApiRunner named. ``--anchor best`` runs all three each round and compares with the
  fastest of that round; ``shipped``, ``in-process`` or ``fnapi`` runs just one.

Per round and side it prints: whole-process wall seconds (Python and TensorFlow imports
included: what a user waits for), per-component seconds from the run's ML Metadata, the peak
resident memory of the largest process and of the process tree, the Evaluator's overall-slice
``sparse_categorical_accuracy``, the eval example count (each side splits the images by its
own hashing, so the counts differ: both are printed, neither is required to equal the other),
the training examples seen (steps x batch) and ours / anchor; then every round's ratio and the
median. This is a benchmark: it has no target. The exit status is non-zero only when a run
fails (the tail of its log is printed).

The example is driven through its private names (``_create_pipeline``, ``_pipeline_name``,
``_beam_pipeline_args``), its run_fn's batch size, its feature keys and the two lines edited
above; if a TFX release changes them, the benchmark stops at once and says what changed.

Run it (from any folder; each side takes tens of seconds per round, ``best`` runs four
pipelines a round)::

    .venv/bin/python benchmarks/digits_vs_tfx_mnist.py [--rounds 3]
        [--anchor best|shipped|in-process|fnapi] [--timeout SECONDS] [--workdir DIR] [--keep]
        [--json] [--check-example]

``--check-example`` only checks that the installed example still has what this benchmark
drives and that the module edits apply (seconds; CI's smoke test runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # its anchor names and text tables
import taxi_vs_tfx_example as taxi  # the sibling benchmark's runners and readers

DIGITS_DIR = taxi.REPO_ROOT / "data" / "digits" / "span-1"
EXAMPLE_REL_DIR = Path("examples") / "mnist"
EXAMPLE_PIPELINE = "mnist_pipeline_native_keras.py"
EXAMPLE_MODULE = "mnist_utils_native_keras.py"
EXAMPLE_BASE = "mnist_utils_native_keras_base.py"
# The example's feature keys, as its base module names them: the records are written with them.
IMAGE_KEY, LABEL_KEY = "image_floats", "image_class"
FEATURE_KEYS = (f"IMAGE_KEY = '{IMAGE_KEY}'", f"LABEL_KEY = '{LABEL_KEY}'")
IMAGE_PIXELS = 64  # 8 x 8
# The only edits to the example's module files (file -> (shipped text, replacement)).
MODULE_EDITS = {
    EXAMPLE_BASE: ("input_shape=(784,)", f"input_shape=({IMAGE_PIXELS},)"),
    EXAMPLE_MODULE: (
        "from tfx.examples.mnist import mnist_utils_native_keras_base as base",
        "import mnist_utils_native_keras_base as base",
    ),
}
EXAMPLE_BATCH = re.compile(
    r"\binput_fn\(\s*fn_args\.train_files,\s*fn_args\.data_accessor,\s*tf_transform_output,"
    r"\s*(\d+)\s*\)"
)
ACCURACY = "sparse_categorical_accuracy"  # TFMA's name for both sides' SparseCategoricalAccuracy
RECORDS_FILE = "digits.tfrecord"


# --------------------------------------------------------------------------- TFX's example


def _example_changed(what: str) -> SystemExit:
    return SystemExit(f"TFX's MNIST example changed: {what}; update {__file__}")


def patched_module_files() -> dict[str, str]:
    """The example's two module files with the edits applied, each checked to apply once."""
    folder = taxi._tfx_dir() / EXAMPLE_REL_DIR
    patched = {}
    for name, (shipped, replacement) in MODULE_EDITS.items():
        path = folder / name
        if not path.is_file():
            raise _example_changed(f"{path} is missing")
        text = path.read_text()
        found = text.count(shipped)
        if found != 1:
            raise _example_changed(
                f"{path} has {found} occurrences of {shipped!r} (expected exactly 1), so the "
                f"edit to {replacement!r} does not apply"
            )
        patched[name] = text.replace(shipped, replacement)
    return patched


def check_example() -> int:
    """The example's training batch size; exits with a clear message if the example changed.

    Reads the installed files without importing TFX (seconds, not minutes).
    """
    folder = taxi._tfx_dir() / EXAMPLE_REL_DIR
    pipeline_file = folder / EXAMPLE_PIPELINE
    if not pipeline_file.is_file():
        raise _example_changed(f"{pipeline_file} is missing")
    missing = taxi.missing_names(pipeline_file, taxi.EXAMPLE_NAMES)
    if missing:
        raise _example_changed(
            f"{pipeline_file} no longer defines {missing}, which this benchmark drives"
        )
    patched = patched_module_files()
    for key in FEATURE_KEYS:
        if key not in patched[EXAMPLE_BASE]:
            raise _example_changed(f"{folder / EXAMPLE_BASE} no longer has `{key}`")
    batch = EXAMPLE_BATCH.search(patched[EXAMPLE_MODULE])
    if batch is None:
        raise _example_changed(
            "cannot find the training batch size (`base.input_fn(fn_args.train_files, ..., N)`) "
            f"in {folder / EXAMPLE_MODULE}"
        )
    return int(batch.group(1))


def write_digit_records(path: Path) -> int:
    """The embedded digit PNGs as the example's tf.train.Examples, one TFRecord file.

    Grey levels 0-255 become 64 floats in [-0.5, 0.5] (row-major), the folder's digit the label.
    """
    import numpy as np
    from PIL import Image

    with taxi._quiet_tf():
        import tensorflow as tf

    files = sorted(DIGITS_DIR.glob("*/*.png"))
    if not files:
        raise SystemExit(f"no digit images under {DIGITS_DIR}: run `python -m data.images digits`")
    with tf.io.TFRecordWriter(str(path)) as writer:
        for png in files:
            pixels = np.asarray(Image.open(png).convert("L"), dtype=np.float32).reshape(-1)
            if pixels.size != IMAGE_PIXELS:
                raise SystemExit(f"{png}: {pixels.size} pixels, not {IMAGE_PIXELS} (8x8)")
            feature = {
                IMAGE_KEY: tf.train.Feature(
                    float_list=tf.train.FloatList(value=pixels / 255.0 - 0.5)
                ),
                LABEL_KEY: tf.train.Feature(
                    int64_list=tf.train.Int64List(value=[int(png.parent.name)])
                ),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())
    return len(files)


def prepare_example(workdir: Path, records: Path) -> Path:
    """A fresh `workdir` with the records where ImportExampleGen reads and the edited module
    files in a folder of their own (TFX packages every .py there); returns the module file."""
    paths = taxi._example_paths(taxi._fresh_dir(workdir))
    paths["data_root"].mkdir(parents=True)
    shutil.copy2(records, paths["data_root"] / RECORDS_FILE)
    module_dir = workdir / "module"
    module_dir.mkdir()
    for name, text in patched_module_files().items():
        (module_dir / name).write_text(text)
    return module_dir / EXAMPLE_MODULE


def run_example(workdir: Path, records: Path, anchor: str, timeout: float) -> taxi.RunResult:
    """One configuration of the example (taxi.ANCHORS) in a fresh subprocess and directory."""
    if anchor not in taxi.ANCHORS:
        raise ValueError(f"unknown anchor {anchor!r}; one of {', '.join(taxi.ANCHORS)}")
    example_dir = workdir / anchor
    prepare_example(example_dir, records)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_run-example", str(example_dir)]
    cmd += ["--_anchor", anchor]
    return taxi._run_timed(anchor, cmd, example_dir, workdir, timeout)


def _drive_example(workdir: Path, anchor: str) -> int:
    """Subprocess body: the MNIST example's own pipeline under LocalDagRunner."""
    check_example()
    pipeline_file = taxi._tfx_dir() / EXAMPLE_REL_DIR / EXAMPLE_PIPELINE
    module_file = workdir / "module" / EXAMPLE_MODULE
    return taxi._drive_example(workdir, anchor, pipeline_file, module_file)


def read_example_results(result: taxi.RunResult, workdir: Path) -> None:
    """The example's accuracy, eval count, component times and training settings (its MLMD)."""
    with taxi._quiet_tf():
        taxi._read_example_results(result, workdir)
        steps, _ = taxi._trainer_settings(taxi._example_paths(workdir)["metadata_path"])
    result.extra.update(train_steps=steps, train_batch=check_example())


# --------------------------------------------------------------------------- our pipeline


def run_ours(workdir: Path, timeout: float) -> taxi.RunResult:
    with taxi._quiet_tf():  # the image trainer's batch size (its module imports TensorFlow)
        from trainer.image.train import ImageHyperparameters
    return taxi.run_ours(workdir, timeout, ("--dataset", "digits"), ImageHyperparameters)


def run_round(
    workdir: Path, records: Path, anchors: list[str], timeout: float
) -> dict[str, taxi.RunResult]:
    """Ours, then each anchor; stops (exit 1, log tail printed) at the first failure."""
    results = {"ours": run_ours(workdir, timeout)}
    for name in anchors:
        if results[next(reversed(results))].returncode != 0:
            break
        results[name] = run_example(workdir, records, name, timeout)
    for name, result in results.items():
        if result.returncode != 0:
            taxi._print_failure(result)
            raise SystemExit(f"{name} failed; work dir kept: {workdir}")
        if name != "ours":
            read_example_results(result, workdir / name)
    return results


# --------------------------------------------------------------------------- report


def accuracy(result: taxi.RunResult) -> float | None:
    value = (result.extra.get("metrics") or {}).get(ACCURACY)
    return float(value) if isinstance(value, int | float) else None


def summarize(results: dict[str, taxi.RunResult]) -> dict[str, Any]:
    """One round: ours / each anchor and the figures each side reports."""
    anchors = {n: r for n, r in results.items() if n != "ours"}
    best = min(anchors, key=lambda n: anchors[n].wall_seconds)
    ours = results["ours"]
    return {
        "best_anchor": best,
        "ratio_vs_best": ours.wall_seconds / anchors[best].wall_seconds,
        "ratios": {n: ours.wall_seconds / a.wall_seconds for n, a in anchors.items()},
        "accuracies": {n: accuracy(r) for n, r in results.items()},
        "eval_example_counts": {n: taxi._eval_count(r) for n, r in results.items()},
        "training_examples_seen": {n: taxi._examples_seen(r) for n, r in results.items()},
        "results": {n: asdict(r) for n, r in results.items()},
    }


def combine_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The median round's figures, every round's ratio, and the median ratio."""
    ordered = sorted(rounds, key=lambda s: s["ratio_vs_best"])
    summary = dict(ordered[(len(ordered) - 1) // 2])
    summary["median_round"] = rounds.index(ordered[(len(ordered) - 1) // 2]) + 1
    summary["ratio_median"] = statistics.median(s["ratio_vs_best"] for s in rounds)
    summary["rounds"] = [
        {
            "ratio_vs_best": s["ratio_vs_best"],
            "best_anchor": s["best_anchor"],
            "ours_seconds": s["results"]["ours"]["wall_seconds"],
            "anchor_seconds": s["results"][s["best_anchor"]]["wall_seconds"],
            "ratios": s["ratios"],
        }
        for s in rounds
    ]
    return summary


def _examples_seen_cell(run: dict[str, Any]) -> str:
    steps, batch = run["extra"].get("train_steps"), run["extra"].get("train_batch")
    return f"{steps} x {batch} = {steps * batch:,}" if steps and batch else "n/a"


def render_round(summary: dict[str, Any], title: str) -> str:
    """One round's table and its per-component seconds (each run's ML Metadata)."""
    results = summary["results"]
    names = list(results)

    def cell(name: str, key: str, digits: int = 1) -> str:
        return taxi._fmt(results[name]["extra"].get(key), digits)

    counts = summary["eval_example_counts"]
    table = [
        ("", *(taxi.ANCHOR_LABELS.get(n, n) for n in names)),
        (
            "wall seconds (whole process)",
            *(taxi._fmt(results[n]["wall_seconds"], 1) for n in names),
        ),
        ("peak RSS MB, largest process", *(cell(n, "peak_rss_mb_max_process", 0) for n in names)),
        ("peak RSS MB, process tree", *(cell(n, "peak_rss_mb_tree", 0) for n in names)),
        (f"eval {ACCURACY}", *(taxi._fmt(summary["accuracies"][n]) for n in names)),
        ("eval examples", *("n/a" if counts[n] is None else str(counts[n]) for n in names)),
        ("training examples seen", *(_examples_seen_cell(results[n]) for n in names)),
        ("blessed", *(taxi._fmt(results[n]["blessed"]) for n in names)),
        ("ours / this", "", *(taxi._fmt(summary["ratios"][n], 3) for n in names[1:])),
    ]
    nodes: list[str] = []  # pipeline order, ours first: the two sides name their nodes apart
    for n in names:
        nodes += [c["node_id"] for c in results[n]["components"] if c["node_id"] not in nodes]
    seconds = {n: {c["node_id"]: c["seconds"] for c in results[n]["components"]} for n in names}
    components = [("component seconds", *names)]
    components += [(node, *(taxi._fmt(seconds[n].get(node), 1) for n in names)) for node in nodes]
    best = summary["best_anchor"]
    return "\n".join(
        [
            f"\n== {title} ==",
            *scale._table(table),
            f"ours / fastest anchor ({best}): {summary['ratio_vs_best']:.3f}",
            *scale._table(components),
        ]
    )


def render_rounds(summary: dict[str, Any]) -> str:
    """Every round's ratio against its fastest anchor, and the median."""
    rounds = ", ".join(f"{r['ratio_vs_best']:.3f} ({r['best_anchor']})" for r in summary["rounds"])
    return (
        f"\nours / fastest anchor, round by round: {rounds}; median "
        f"{summary['ratio_median']:.3f} (the median round: {summary['median_round']})"
    )


# --------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of both sides, back to back")
    parser.add_argument(
        "--anchor",
        choices=("best", *scale.ANCHOR_NAMES),
        default="best",
        help="best: run the example in each configuration, compare with the fastest",
    )
    parser.add_argument("--timeout", type=float, default=taxi.RUN_TIMEOUT, help="seconds per run")
    parser.add_argument("--workdir", type=Path, help="default: a new temp dir (kept if given)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    parser.add_argument(
        "--check-example",
        action="store_true",
        help="only check that TFX's installed example still has what this benchmark drives",
    )
    # Internal: the subprocess that runs TFX's example.
    parser.add_argument("--_run-example", dest="run_example", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--_anchor", dest="anchor_run", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.run_example is not None:
        return _drive_example(args.run_example.resolve(), args.anchor_run)
    batch = check_example()  # before minutes of runs, not after
    if args.check_example:
        edits = "; ".join(f"{old!r} -> {new!r}" for old, new in MODULE_EDITS.values())
        print(
            f"TFX's MNIST example: {', '.join(taxi.EXAMPLE_NAMES)} present; training batch "
            f"{batch}; module edits apply once each: {edits}"
        )
        return 0
    if args.rounds < 1:
        raise SystemExit("--rounds: at least 1")
    anchors = list(taxi.ANCHORS) if args.anchor == "best" else [scale.ANCHOR_NAMES[args.anchor]]
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="digits-vs-tfx-mnist-"))).resolve()
    records = taxi._fresh_dir(workdir / "records") / RECORDS_FILE
    print(f"work dir: {workdir}", flush=True)
    print(f"[records] {write_digit_records(records)} digit images -> {records}", flush=True)
    summaries = []
    for r in range(1, args.rounds + 1):
        print(f"[round {r}/{args.rounds}]", flush=True)
        results = run_round(taxi._fresh_dir(workdir / f"round-{r}"), records, anchors, args.timeout)
        summaries.append(summarize(results))
        print(render_round(summaries[-1], f"round {r}"), flush=True)
    combined = combine_rounds(summaries)
    print(render_rounds(combined))
    if args.json:
        print(
            json.dumps({"anchor": args.anchor, **combined}, indent=2, sort_keys=True, default=str)
        )
    return scale.finish_workdir(workdir, keep=args.keep or bool(args.workdir))


if __name__ == "__main__":
    sys.exit(main())
