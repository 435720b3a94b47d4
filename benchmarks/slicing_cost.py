"""The Evaluator's time with and without taxi's slicing, on its fast path and on TFMA's.

    .venv/bin/python benchmarks/slicing_cost.py [--rows 100000] [--repeats 2] [--json]
    .venv/bin/python benchmarks/record.py --name slicing_cost-100k benchmarks/slicing_cost.py

Set-up (not timed): a taxi model trained by the pipeline on the embedded
3,000-row sample (40 steps; the cost of evaluating does not depend on how well
the model was trained), and a generated span of --rows rows (`python -m
data.generate`) ingested by the pipeline's CsvExampleGen (its eval split, a
third of the rows, is what the Evaluator reads).

After both paths have run once on the sample (not timed: library loading and
tracing), measured, alternating, --repeats times each, in this process: the pipeline's
Evaluator executor (components/evaluation/slicing/evaluator.py, with the pipeline's Beam
arguments, EvalConfig, slice rules and extractors module) on that eval split, for
  - whole split: the EvalConfig without the dataset file's slicing;
  - taxi slicing: payment type and trip distance bucket, with the per-slice false
    positive and negative rates and the per-slice rules;
each on the fast path (components/evaluation/fast) and on TFMA's path (the anchor: the
same executor with the fast path declined, so TFX's executor runs TFMA over Beam).
Printed: seconds of each run, the best of each, fast / TFMA per configuration, and
taxi slicing / whole split per path.
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
# The project (data.tables included) is importable through its editable install.


def _prepare(work: Path, rows: int):
    from data.tables import small_config, write_sample
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


def newest_artifact(config, type_name: str, producer: str):
    """The newest artifact of `type_name` that `producer` wrote, from `config`'s ML Metadata."""
    from ml_metadata.metadata_store import metadata_store
    from tfx.orchestration import metadata
    from tfx.types import artifact_utils

    store = metadata_store.MetadataStore(
        metadata.sqlite_metadata_connection_config(config.metadata_path)
    )
    [artifact_type] = [store.get_artifact_type(type_name)]
    artifact = max(
        (a for a in store.get_artifacts_by_type(type_name) if f"/{producer}/" in a.uri),
        key=lambda a: a.id,
    )
    return artifact_utils.deserialize_artifact(artifact_type, artifact)


def executor_classes() -> dict[str, type]:
    from components.evaluation.slicing.evaluator import Executor, TfmaExecutor

    return {"fast": Executor, "tfma": TfmaExecutor}


def evaluate_once(executor_class, model, examples, config, out: Path, baseline=None) -> float:
    """Seconds of one Evaluator execution (no baseline, as on a first run, unless given)."""
    from tfx.dsl.components.base import base_beam_executor
    from tfx.types import standard_artifacts
    from tfx.utils import proto_utils

    from components.evaluation import extractors as evaluation
    from pipeline.eval_config import eval_config, slice_rules

    evaluation_artifact = standard_artifacts.ModelEvaluation()
    evaluation_artifact.uri = str(out / "evaluation")
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = str(out / "blessing")
    blessing_dir = Path(blessing.uri)
    blessing_dir.mkdir(parents=True)
    properties = {
        "eval_config": proto_utils.proto_to_json(eval_config(config)),
        "module_path": evaluation.MODULE_PATH,
        "slice_rules": slice_rules(config).to_json(),
        "example_splits": '["eval"]',
    }
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=list(config.beam_args), tmp_dir=str(out / "tmp"), unique_id="1"
    )
    inputs = {"examples": [examples], "model": [model]}
    if baseline is not None:
        inputs["baseline_model"] = [baseline]
    started = time.perf_counter()
    executor_class(context).Do(
        inputs,
        {"evaluation": [evaluation_artifact], "blessing": [blessing]},
        properties,
    )
    return time.perf_counter() - started


def _report(seconds: dict[str, list[float]]) -> dict[str, float]:
    """Best of each variant, and the ratios printed."""
    best = {name: min(values) for name, values in seconds.items()}
    ratios = {}
    for config_name in ("whole split", "taxi slicing"):
        ratio = best[f"{config_name}, fast"] / best[f"{config_name}, tfma"]
        ratios[f"{config_name}: fast / tfma"] = ratio
    for path in ("fast", "tfma"):
        ratio = best[f"taxi slicing, {path}"] / best[f"whole split, {path}"]
        ratios[f"{path}: taxi slicing / whole split"] = ratio
    for name, value in best.items():
        print(f"  best {name:<20} {value:6.1f} s")
    for name, value in ratios.items():
        print(f"  {name:<34} {value:.3f}")
    return ratios


def print_result(benchmark: str, seconds: dict, ratios: dict, **extra) -> None:
    """The JSON result record.py keeps: every run's seconds, the best of each, the ratios."""
    result = {"benchmark": benchmark, **extra, "seconds": seconds}
    result.update(best={k: min(v) for k, v in seconds.items()}, ratios=ratios)
    print(json.dumps(result, indent=2))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="rows of the generated span")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--json", action="store_true", help="also print the results as JSON")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="slicing-cost-"))
    try:
        print(f"set-up: training a taxi model, generating and ingesting {args.rows:,} rows ...")
        from data.tables import small_config

        model_uri, split, config = _prepare(work, args.rows)
        eval_rows = sum(
            1
            for _ in __import__("tensorflow").data.TFRecordDataset(
                sorted(map(str, split.glob("*"))), "GZIP"
            )
        )
        model_run = small_config(work / "model-run").replace(data_root=str(work / "sample"))
        model = newest_artifact(model_run, "Model", "Trainer")
        assert model.uri == model_uri, (model.uri, model_uri)
        examples = newest_artifact(config, "Examples", "CsvExampleGen")
        configs = {"whole split": config.replace(slicing=None), "taxi slicing": config}
        # Not timed: each path once on the sample's eval split, so that loading
        # libraries and tracing the model's functions count against neither.
        for path, executor_class in executor_classes().items():
            sample = newest_artifact(model_run, "Examples", "CsvExampleGen")
            evaluate_once(executor_class, model, sample, config, work / f"warm-up-{path}")
        print("  warm-up (not timed): both paths on the sample's eval split", flush=True)
        seconds: dict[str, list[float]] = {}
        for i in range(args.repeats):
            for config_name, variant in configs.items():
                for path, executor_class in executor_classes().items():
                    name = f"{config_name}, {path}"
                    out = work / f"{config_name.replace(' ', '-')}-{path}-{i}"
                    took = evaluate_once(executor_class, model, examples, variant, out)
                    seconds.setdefault(name, []).append(took)
                    print(f"  {name:<20} run {i + 1}: {took:.1f} s", flush=True)
        print(f"Evaluator on {eval_rows:,} eval rows of a {args.rows:,}-row span:")
        ratios = _report(seconds)
        if args.json:
            print_result("slicing_cost", seconds, ratios, rows=args.rows, eval_rows=eval_rows)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
