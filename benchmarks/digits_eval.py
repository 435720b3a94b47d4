"""The digits pipeline's Evaluator on its fast path and on TFMA's.

    .venv/bin/python benchmarks/digits_eval.py [--repeats 3] [--json]

Set-up (not timed): the digits pipeline (schema/digits/dataset.yaml: the embedded
1,797 images of data/digits/span-1) run up to its Trainer in a temporary folder.

After both paths have run once (not timed: library loading and tracing), measured,
alternating, --repeats times each, in this process: the pipeline's Evaluator
executor (components/evaluation/slicing/evaluator.py, with the pipeline's Beam arguments,
EvalConfig, slice rules and extractors module: SparseCategoricalAccuracy, example
count, each class's fall-out and miss rate, on the whole eval split and per digit)
on the ImageExampleGen's eval split, for
  - first run: the trained model alone;
  - against a baseline: the same model as the baseline too (both models scored,
    every metric diffed, the change thresholds checked);
each on the fast path (components/evaluation/fast) and on TFMA's path (the anchor: the
same executor with the fast path declined, so TFX's executor runs TFMA over Beam).
Printed: seconds of each run, the best of each, and fast / TFMA per variant.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from slicing_cost import ROOT, evaluate_once, executor_classes, newest_artifact, print_result

VARIANTS = ("first run", "against a baseline")


def _prepare(work: Path):
    """The digits config in `work`, run up to its Trainer; (config, model, examples)."""
    from pipeline.datasets import DATASETS
    from tfxp.local.runner import run_local

    shutil.copytree(ROOT / "data" / "digits" / "span-1", work / "data" / "span-1")
    config = DATASETS["digits"].replace(data_root=str(work / "data"), run_dir=str(work / "run"))
    run_local(config, to_nodes=["Trainer"], printer=lambda _: None)
    model = newest_artifact(config, "Model", "Trainer")
    examples = newest_artifact(config, "Examples", "ImageExampleGen")
    return config, model, examples


def _eval_rows(examples) -> int:
    import tensorflow as tf

    files = sorted(str(f) for f in Path(examples.uri, "Split-eval").glob("*"))
    return sum(1 for _ in tf.data.TFRecordDataset(files, "GZIP"))


def _report(seconds: dict[str, list[float]]) -> dict[str, float]:
    best = {name: min(values) for name, values in seconds.items()}
    ratios = {
        f"{variant}: fast / tfma": best[f"{variant}, fast"] / best[f"{variant}, tfma"]
        for variant in VARIANTS
    }
    for name, value in best.items():
        print(f"  best {name:<26} {value:6.2f} s")
    for name, value in ratios.items():
        print(f"  {name:<34} {value:.3f}")
    return ratios


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="digits-eval-"))
    try:
        print("set-up: the digits pipeline up to its Trainer ...", flush=True)
        config, model, examples = _prepare(work)
        eval_rows = _eval_rows(examples)
        baselines = {"first run": None, "against a baseline": model}
        for path, executor_class in executor_classes().items():
            evaluate_once(executor_class, model, examples, config, work / f"warm-up-{path}")
        print("  warm-up (not timed): both paths once", flush=True)
        seconds: dict[str, list[float]] = {}
        for i in range(args.repeats):
            for variant, baseline in baselines.items():
                for path, executor_class in executor_classes().items():
                    name = f"{variant}, {path}"
                    out = work / f"{variant.replace(' ', '-')}-{path}-{i}"
                    took = evaluate_once(executor_class, model, examples, config, out, baseline)
                    seconds.setdefault(name, []).append(took)
                    print(f"  {name:<26} run {i + 1}: {took:.2f} s", flush=True)
        print(f"digits Evaluator on {eval_rows:,} eval images (whole split and per digit):")
        ratios = _report(seconds)
        if args.json:
            print_result("digits_eval", seconds, ratios, eval_rows=eval_rows)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
