"""`tfxp train --workers N`: the Trainer again, on N local worker processes (multi-worker).

Trains on the newest Transform output of the local run (`tfxp run` first),
each worker a process with its own TF_CONFIG on loopback, as Vertex AI or a
TFJob would start them (tfxp/local/workers.py, trainer/distribution.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tfxp.cli.common import add_config_flags, config_from_args


def cmd_train(args: argparse.Namespace) -> int:
    from tfxp.local.workers import WorkersError, launch, trainer_args

    config = config_from_args(args)
    out = Path(args.out or Path(config.run_dir) / "multiworker" / time.strftime("%Y%m%d-%H%M%S"))
    try:
        trainer = trainer_args(config, out)
        print(f"training {config.pipeline_name} on {args.workers} local worker(s) -> {out}")
        start = time.monotonic()
        results = launch(trainer, args.workers, out, timeout_s=args.timeout)
    except WorkersError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    failed = [r for r in results if r.returncode != 0]
    for r in results:
        state = "ok" if r.returncode == 0 else f"FAILED ({r.returncode or 'killed at deadline'})"
        print(f"  worker {r.index}: {state}, log {r.log}")
    if failed:
        print(f"ERROR: {len(failed)} worker(s) failed: see their logs", file=sys.stderr)
        return 1
    print(f"done in {time.monotonic() - start:.1f}s; model (chief): {trainer.serving_model_dir}")
    for report in sorted(Path(trainer.model_run_dir).glob("input_wait*.json")):
        total = json.loads(report.read_text())["total"]
        print(
            f"  {report.name}: {total['steps']} steps, waited {total['wait_s']}s for input, "
            f"computed {total['compute_s']}s, startup {total['startup_s']}s"
        )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser(
        "train", help="train again on the last run's Transform output, on N local workers"
    )
    add_config_flags(train)
    train.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    train.add_argument("--train-steps", type=int, help="training steps (default from config)")
    train.add_argument("--eval-steps", type=int)
    train.add_argument("--out", help="output folder (default <run-dir>/multiworker/<time>)")
    train.add_argument(
        "--timeout", type=float, default=1800, help="seconds before the workers are stopped"
    )
    train.set_defaults(func=cmd_train)
