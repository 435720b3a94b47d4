"""Tuning throughput: trials per minute at a fixed trial budget, sequential against parallel.

    .venv/bin/python benchmarks/tuning.py [--rows 20000] [--trials 8] [--trial-steps 200]
                                          [--parallel N] [--json]

One invocation, one taxi Transform output (`--rows` generated taxi rows,
`python -m data.generate`, run through the pipeline up to Transform), and the
same search twice, as the Tuner step runs it (trainer/tuning.py through the
taxi trainer's `tuner_fn`): the same random search space, seed, trial budget
and steps per trial.
  - sequential: `parallel_trials: 1`, every trial in this process, one after another
                (TensorFlow already imported, as in the Tuner's own process);
  - parallel:   `parallel_trials: N` (default: this machine's cores), trials in N
                worker processes (trainer/parallel_trials.py), their start-up included.
Reported per mode: wall seconds of the search, trials completed, trials per
minute and the best trial's eval loss; then the ratio parallel / sequential
of trials per minute. The ratio depends on the trial size: small trials are
dominated by a worker's start (importing TensorFlow, building the input).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

TUNER_FN = "trainer.taxi.train.tuner_fn"
SEARCH_SPACE = {
    "learning_rate": {"min": 0.0003, "max": 0.03, "sampling": "log"},
    "hidden_units": {"choices": [[64, 32], [128, 64], [32]]},
}


def _transform(rows: int, tmp: Path):
    """The taxi pipeline up to Transform on `rows` generated rows: (config, examples, graph)."""
    from pipeline.datasets import dataset_config
    from tfxp.local.runner import run_local

    data = tmp / "data"
    subprocess.run(
        [sys.executable, "-m", "data.generate", str(data / "span-1"), "--rows", str(rows)]
        + ["--seed", "3"],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    config = dataset_config("taxi").replace(
        data_root=str(data), run_dir=str(tmp / "run"), eval_steps=5
    )
    run_local(config, to_nodes=("Transform",), printer=lambda _: None)
    transform = Path(config.pipeline_root) / "Transform"
    [examples] = (transform / "transformed_examples").iterdir()
    [graph] = (transform / "transform_graph").iterdir()
    return config, examples, graph


def _fn_args(config, examples: Path, graph: Path, trials: int, steps: int, parallel: int, work):
    from tfx.components.trainer.fn_args_utils import FnArgs

    from pipeline.config import TuningOptions

    tuning = TuningOptions(
        search_space=SEARCH_SPACE, max_trials=trials, trial_steps=steps, parallel_trials=parallel
    )
    return FnArgs(
        working_dir=str(work),
        train_files=[str(examples / "Split-train" / "*")],
        eval_files=[str(examples / "Split-eval" / "*")],
        train_steps=steps,
        eval_steps=config.eval_steps,
        transform_graph_path=str(graph),
        transform_output=str(graph),
        custom_config={
            "tuner_fn": TUNER_FN,
            "hyperparameters": dict(config.hyperparameters),
            "tuning": tuning.to_dict(),
        },
    )


def _search(fn_args) -> dict:
    """One search as the Tuner runs it; its wall time, trials and best score."""
    from trainer.taxi.train import tuner_fn

    start = time.perf_counter()
    # KerasTuner's and Keras's progress to stderr: stdout is the report (or its JSON).
    with contextlib.redirect_stdout(sys.stderr):
        tuner = tuner_fn(fn_args).tuner
        tuner.search()
    seconds = time.perf_counter() - start
    done = [t for t in tuner.oracle.trials.values() if t.status == "COMPLETED"]
    best = tuner.oracle.get_best_trials(1)[0]
    return {
        "seconds": round(seconds, 1),
        "trials": len(done),
        "trials_per_minute": round(60 * len(done) / seconds, 2),
        "best_eval_loss": round(float(best.score), 4),
    }


def bench(rows: int, trials: int, steps: int, parallel: int, tmp: Path) -> dict:
    config, examples, graph = _transform(rows, tmp)
    results = {}
    for mode, n in (("sequential", 1), ("parallel", parallel)):
        args = _fn_args(config, examples, graph, trials, steps, n, tmp / f"work-{mode}")
        results[mode] = {"parallel_trials": n, **_search(args)}
    seq, par = results["sequential"], results["parallel"]
    return {
        "rows": rows,
        "trials": trials,
        "trial_steps": steps,
        "cpus": os.cpu_count(),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "results": results,
        "parallel_vs_sequential": round(par["trials_per_minute"] / seq["trials_per_minute"], 2),
    }


def main() -> int:
    from trainer.parallel_trials import cores

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=20_000, help="generated taxi rows")
    p.add_argument("--trials", type=int, default=8, help="the trial budget of each search")
    p.add_argument("--trial-steps", type=int, default=200, help="training steps per trial")
    p.add_argument("--parallel", type=int, default=cores(), help="parallel trials (cores)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.parallel < 2:
        p.error("--parallel must be at least 2 (this machine has one core: give it explicitly)")
    with tempfile.TemporaryDirectory(prefix="bench-tuning-") as tmp:
        result = bench(args.rows, args.trials, args.trial_steps, args.parallel, Path(tmp))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"{result['rows']:,} generated taxi rows, {result['trials']} trials of "
        f"{result['trial_steps']} steps, {result['cpus']} cores "
        f"(load average {result['load_average_1min']} at the end)"
    )
    for mode, r in result["results"].items():
        print(
            f"  {mode:<10} parallel_trials {r['parallel_trials']}: {r['seconds']:7.1f}s  "
            f"{r['trials']} trials  {r['trials_per_minute']:6.2f} trials/min  "
            f"best eval loss {r['best_eval_loss']}"
        )
    print(f"parallel / sequential: {result['parallel_vs_sequential']}x trials per minute")
    return 0


if __name__ == "__main__":
    sys.exit(main())
