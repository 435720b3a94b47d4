"""`tfxp engine start|status|stop`: a standalone Spark cluster on this machine for `--beam spark`.

The cluster is started from the installed pyspark (beam_spark/cluster.py): a master
and N workers, each its own JVM, on loopback, with their logs, work folders and
state under one directory (default runs/engine/). It runs in the background until
`tfxp engine stop`; `tfxp run --beam spark` uses it when no --spark-master is given.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from beam_spark import cluster
from beam_spark.cluster_api import executor_runs
from tfxp.engine import ENGINE_DIR

# The Python workers of every executor import TensorFlow for the pipeline's Beam work.
WORKER_ENV = {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}


def cmd_start(args: argparse.Namespace) -> int:
    directory = args.dir
    print(
        f"starting a Spark cluster: a master and {args.workers} worker(s) of {args.cores} "
        f"core(s) and {args.memory} each, in {directory}",
        flush=True,
    )
    try:
        started = cluster.start(
            directory,
            args.workers,
            cores=args.cores,
            memory=args.memory,
            timeout=args.timeout,
            env=WORKER_ENV,
            progress=lambda line: print(f"  {line}", flush=True),
        )
    except cluster.ClusterError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    print(f"Spark cluster up: master {started.master_url}, web UI {started.web_ui}")
    print(f"  logs: {started.directory}/logs/; state: {started.directory}/{cluster.STATE_FILE}")
    print(f"  run the pipeline on it: tfxp run --beam spark{_dir_flag(args, ' --spark-master')}")
    print(f"  any Beam Python program: {' '.join(started.beam_flags())}")
    print(f"  stop it: tfxp engine stop{_dir_flag(args)}")
    return 0


def _dir_flag(args: argparse.Namespace, master_flag: str = "") -> str:
    """The flag a later command needs to find a cluster started outside runs/engine/."""
    if args.dir == ENGINE_DIR:
        return ""
    if master_flag:
        loaded = cluster.load(args.dir)
        return f"{master_flag} {loaded.master_url}" if loaded else ""
    return f" --dir {args.dir}"


def cmd_status(args: argparse.Namespace) -> int:
    try:
        status = cluster.status(args.dir)
    except cluster.ClusterError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    if status is None:
        print(f"no Spark cluster recorded in {args.dir} (`tfxp engine start spark --workers 2`)")
        return 1
    if args.json:
        print(json.dumps(_status_json(status), indent=2, sort_keys=True))
    else:
        print(render_status(status))
    return 0 if not status.gone and status.master is not None else 1


def render_status(status: cluster.Status) -> str:
    c = status.cluster
    up = "up" if not status.gone and status.master is not None else "DEGRADED"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c.started_at))
    lines = [
        f"Spark cluster {up}: master {c.master_url}, web UI {c.web_ui} (started {since})",
        f"  java: {c.java}",
    ]
    workers = {w.get("port"): w for w in (status.master or {}).get("workers", [])}
    for d in c.daemons:
        state = "running" if d in status.running else "GONE"
        line = f"  {d.name:<9} pid {d.pid:<7} {state:<8} {d.web_ui}"
        entry = workers.get(d.port)
        if d.name != "master" and entry:
            line += (
                f"  {entry['state']}, cores {entry['coresused']}/{entry['cores']} used, "
                f"memory {entry['memoryused']}/{entry['memory']} MB used"
            )
        lines.append(line)
    if status.master is None:
        lines.append(f"  master's REST API: {status.master_error}")
    else:
        lines += _apps_lines(status)
    lines.append(f"  logs: {c.directory}/logs/")
    lines.append(f"Beam flags for any Beam Python program: {' '.join(c.beam_flags())}")
    return "\n".join(lines)


def _apps_lines(status: cluster.Status, last: int = 5) -> list[str]:
    master = status.master or {}  # None: the master did not answer
    active = master.get("activeapps", [])
    done = master.get("completedapps", [])
    lines = [f"  applications: {len(active)} running, {len(done)} finished"]
    shown = sorted([*active, *done], key=lambda a: a.get("starttime", 0))[-last:]
    tasks: dict[str, dict[str, int]] = {}
    for run in executor_runs(f"{status.cluster.directory}/work", [a["id"] for a in shown]):
        per_worker = tasks.setdefault(run.app_id, {})
        per_worker[run.worker] = per_worker.get(run.worker, 0) + run.tasks
    for app in shown:
        spread = ", ".join(f"{w} {n}" for w, n in sorted(tasks.get(app["id"], {}).items()))
        lines.append(
            f"    {app['id']}  {app['name']:<24} {app['state']:<9} "
            f"{app.get('duration', 0) / 1000:7.1f}s  tasks: {spread or 'none'}"
        )
    return lines


def _status_json(status: cluster.Status) -> dict:
    return {
        "cluster": json.loads(status.cluster.to_json()),
        "running": [d.name for d in status.running],
        "gone": [d.name for d in status.gone],
        "master": status.master,
        "master_error": status.master_error,
        "beam_flags": list(status.cluster.beam_flags()),
    }


def cmd_stop(args: argparse.Namespace) -> int:
    try:
        recorded = cluster.load(args.dir)
        stopped = cluster.stop(args.dir)
    except cluster.ClusterError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    if recorded is None:
        print(f"no Spark cluster recorded in {args.dir}: nothing to stop")
        return 0
    for d in stopped:
        print(f"stopped {d.name} (pid {d.pid})")
    gone = [d.name for d in recorded.daemons if d not in stopped]
    if gone:
        print(f"already gone: {', '.join(gone)}")
    print(f"Spark cluster {recorded.master_url} stopped; logs kept in {recorded.directory}/logs/")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    engine = sub.add_parser(
        "engine", help="a Spark cluster on this machine for `tfxp run --beam spark`"
    )
    commands = engine.add_subparsers(dest="engine_command", required=True)

    def with_dir(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--dir",
            type=os.path.abspath,
            default=ENGINE_DIR,
            help="the cluster's logs, work folders and state (default runs/engine/)",
        )
        return p

    start = with_dir(
        commands.add_parser(
            "start",
            help="start a standalone cluster (master + N workers, loopback) in the background",
        )
    )
    start.add_argument("engine", choices=("spark",), help="the engine (Apache Spark)")
    start.add_argument("--workers", type=int, default=2, help="worker JVMs (default 2)")
    start.add_argument("--cores", type=int, default=1, help="cores each worker offers (default 1)")
    start.add_argument(
        "--memory",
        default="2g",
        help="memory each worker offers its executor, e.g. 2g or 512m (default 2g)",
    )
    start.add_argument(
        "--timeout",
        type=float,
        default=cluster.DEFAULT_TIMEOUT_S,
        help="seconds to wait for every worker to register (default %(default)s)",
    )
    start.set_defaults(func=cmd_start)
    status = with_dir(
        commands.add_parser(
            "status", help="the cluster's JVMs, workers, applications and Beam flags"
        )
    )
    status.add_argument(
        "--json", action="store_true", help="as JSON (the master's REST answer too)"
    )
    status.set_defaults(func=cmd_status)
    stop = with_dir(
        commands.add_parser("stop", help="stop the JVMs `engine start` started, by pid")
    )
    stop.set_defaults(func=cmd_stop)
