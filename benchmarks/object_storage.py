"""The same pipeline run on local disk and on S3 (a local SeaweedFS), in one invocation.

    .venv/bin/python benchmarks/object_storage.py [--rows 15002] [--train-steps 200]

Starts a private SeaweedFS (scripts/seaweedfs.sh) on a free loopback port,
uploads the same sample with `tfxp data upload`, then runs `tfxp run` twice,
each a fresh process with a fresh store: once with data, pipeline root and
serving dir on local disk (the anchor), once with all three in a bucket.
Prints wall seconds (imports included), per-component seconds and the ratio
s3 / local. Both stores are on this machine, so the ratio measures the
object-storage path (HTTP, the relay, copy-instead-of-rename), not a network.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TFXP = str(Path(sys.executable).parent / "tfxp")
SCRIPT = str(ROOT / "scripts" / "seaweedfs.sh")
EMBEDDED = ROOT / "data" / "taxi" / "span-1" / "data.csv"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(args: list[str], env: dict[str, str]) -> tuple[float, dict]:
    started = time.perf_counter()
    done = subprocess.run(
        [TFXP, *args, "--json"], env=env, capture_output=True, text=True, timeout=1800
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"tfxp {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, json.loads(done.stdout[done.stdout.index("{") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=15002, help="rows of the embedded CSV")
    parser.add_argument("--train-steps", type=int, default=200)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tfxp-bench-s3-") as tmp:
        tmp = Path(tmp)
        span = tmp / "local-data" / "span-1"
        span.mkdir(parents=True)
        with EMBEDDED.open() as src, (span / "data.csv").open("w") as dst:
            dst.writelines(itertools.islice(src, args.rows + 1))
        port = _free_port()
        started = subprocess.run(
            [SCRIPT, "start", str(tmp / "seaweedfs"), str(port)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        if started.returncode != 0:
            sys.exit(f"could not start SeaweedFS:\n{started.stderr}")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "S3_"))}
        for line in started.stdout.splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = value
        try:
            up = subprocess.run(
                [TFXP, "data", "upload", "s3://bench/taxi", "--source-root", str(span.parent)],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            if up.returncode != 0:
                sys.exit(up.stderr)
            steps = ["--train-steps", str(args.train_steps)]
            local_wall, local = _run(
                ["run", "--data-root", str(span.parent), "--run-dir", str(tmp / "local"), *steps],
                env,
            )
            s3_wall, s3 = _run(
                [
                    "run",
                    "--data-root",
                    "s3://bench/taxi",
                    "--run-dir",
                    "s3://bench/runs/taxi",
                    "--state-dir",
                    str(tmp / "s3-state"),
                    *steps,
                ],
                env,
            )
        finally:
            subprocess.run(
                [SCRIPT, "stop", str(tmp / "seaweedfs")], capture_output=True, timeout=120
            )

    print(f"rows {args.rows}, train steps {args.train_steps}")
    print(f"{'component':<26}{'local s':>9}{'s3 s':>9}")
    s3_by_node = {c["node_id"]: c for c in s3["components"]}
    for c in local["components"]:
        other = s3_by_node.get(c["node_id"], {})
        print(f"  {c['node_id']:<24}{c['seconds']:>9.1f}{other.get('seconds', 0.0):>9.1f}")
    print(f"{'wall (process)':<26}{local_wall:>9.1f}{s3_wall:>9.1f}")
    print(f"ratio s3 / local: {s3_wall / local_wall:.2f}")
    print(f"pushed: {local['pushed_model']} | {s3['pushed_model']}")


if __name__ == "__main__":
    main()
