"""The Evaluator's extra cost of evaluation by slice: the same model and eval data, with and without taxi's slicing.

    .venv/bin/python benchmarks/slicing_cost.py [--rows 100000] [--repeats 2] [--json]
    .venv/bin/python benchmarks/record.py --name slicing_cost-100k benchmarks/slicing_cost.py

Set-up (not timed): a taxi model trained by the pipeline on the embedded
3,000-row sample (40 steps; the cost of evaluating does not depend on how well
the model was trained), and a generated span of --rows rows (`python -m
data.generate`) ingested by the pipeline's CsvExampleGen (its eval split, a
third of the rows, is what the Evaluator reads).

Measured, alternating, --repeats times each, in this process: TFMA's
`run_model_analysis` with the project's extractors (components/evaluation.py)
on the eval split, with the pipeline's EvalConfig for
  - anchor: the whole split only (what the Evaluator computed before slicing);
  - sliced: taxi's slicing (payment type, trip distance bucket), the
    per-slice false positive and negative rates, and the bucket feature.
Printed: seconds of each run, the best of each, and sliced / anchor.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The project is importable through its editable install (put first, its kubeflow/
# would shadow the installed `kubeflow` namespace TFX imports); the e2e helpers are not.
sys.path.append(str(ROOT / "tests" / "e2e"))


def _prepare(work: Path, rows: int):
    from e2e_support import small_config, write_sample

    from tfxp.local.runner import run_local

    write_sample(work / "sample")
    trained = run_local(
        small_config(work / "model-run").replace(data_root=str(work / "sample")),
        to_nodes=["Trainer"],
        printer=lambda _: None,
    )
    subprocess.run(
        [sys.executable, "-m", "data.generate", str(work / "big" / "span-1"), "--rows", str(rows)],
        cwd=ROOT,
        check=True,
    )
    big = small_config(work / "big-run").replace(data_root=str(work / "big"))
    run_local(big, to_nodes=["CsvExampleGen"], printer=lambda _: None)
    (split,) = Path(big.pipeline_root).glob("CsvExampleGen/examples/*/Split-eval")
    return trained.model_uri, split, big


def _evaluate(model_uri: str, split: Path, config, out: Path) -> float:
    import tensorflow_model_analysis as tfma

    from components.evaluation import custom_extractors
    from components.slicing.rules import bucketed
    from pipeline.definition import eval_config, slice_rules

    ec = tfma.utils.update_eval_config_with_defaults(
        eval_config(config), has_baseline=False, rubber_stamp=True
    )
    started = time.perf_counter()
    model = tfma.default_eval_shared_model(
        eval_saved_model_path=str(Path(model_uri) / "Format-Serving"), eval_config=ec
    )
    with bucketed(slice_rules(config).buckets):
        tfma.run_model_analysis(
            eval_shared_model=model,
            eval_config=ec,
            data_location=str(split / "*"),
            output_path=str(out),
            extractors=custom_extractors(model, ec, None),
        )
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="rows of the generated span")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="slicing-cost-"))
    try:
        print(f"set-up: training a taxi model, generating and ingesting {args.rows:,} rows ...")
        model_uri, split, config = _prepare(work, args.rows)
        eval_rows = sum(
            1
            for _ in __import__("tensorflow").data.TFRecordDataset(
                sorted(map(str, split.glob("*"))), "GZIP"
            )
        )
        variants = {"anchor": config.replace(slicing=None), "sliced": config}
        seconds: dict[str, list[float]] = {name: [] for name in variants}
        for i in range(args.repeats):
            for name, variant in variants.items():
                took = _evaluate(model_uri, split, variant, work / f"{name}-{i}")
                seconds[name].append(took)
                print(f"  {name:<7} run {i + 1}: {took:.1f} s")
        best = {name: min(values) for name, values in seconds.items()}
        ratio = best["sliced"] / best["anchor"]
        print(
            f"Evaluator on {eval_rows:,} eval rows of a {args.rows:,}-row span: "
            f"overall only {best['anchor']:.1f} s, with taxi's slicing {best['sliced']:.1f} s, "
            f"ratio {ratio:.2f}"
        )
        if args.json:
            result = {"benchmark": "slicing_cost", "rows": args.rows, "eval_rows": eval_rows}
            result.update(seconds=seconds, best=best, ratio=ratio)
            print(json.dumps(result, indent=2))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
