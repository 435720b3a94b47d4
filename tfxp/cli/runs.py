"""`tfxp runs`: the pipeline's runs, answered from ML Metadata alone.

    tfxp runs list                         run id, start, duration, status, span, model, verdicts
    tfxp runs show <run|latest>            components (executed/cached), data, schema, code, metrics
    tfxp runs diff <run-a> <run-b>         what changed: data, schema, code, hyperparameters, metrics

Every command reads the run directory's metadata.sqlite (--run-dir, default
runs/<pipeline>) or a MySQL store (--mysql-host/--mysql-port/--mysql-database/
--mysql-user, password in MLMD_MYSQL_PASSWORD); `--json` prints stable JSON
(sorted keys).
"""

from __future__ import annotations

import argparse
import sys

from tfxp.cli.common import add_store_query_flags, open_lineage, printed, standalone_main


def _verdicts(lin, runs) -> dict[int, tuple[bool, bool]]:
    out = {}
    for r in runs:
        if r.model_id and r.model_id not in out:
            b = lin.blessing(r.model_id)
            pushed = any(p.pushed for p in lin.pushes(r.model_id))
            out[r.model_id] = (bool(b and b.blessed), pushed)
    return out


def cmd_runs_list(args: argparse.Namespace) -> str:
    import dataclasses

    from tfxp.cli.render import dumps, render_runs

    lin = open_lineage(args)
    runs = lin.list_runs()
    verdicts = _verdicts(lin, runs)
    if args.json:
        rows = []
        for r in runs:
            row = dataclasses.asdict(r)
            blessed, pushed = verdicts.get(r.model_id, (None, None))
            row.update(blessed=blessed, pushed=pushed, executed=r.executed, cached=r.cached)
            rows.append(row)
        return dumps({"pipeline": lin.pipeline, "runs": rows})
    return render_runs(runs, verdicts)


def cmd_runs_show(args: argparse.Namespace) -> str:
    import dataclasses

    from tfxp.cli.render import dumps, render_run
    from tfxp.presentation.lineage_report import run_facts

    lin = open_lineage(args)
    run_id = lin.resolve_run(args.run)
    info = lin.run_info(run_id)
    facts = run_facts(lin, run_id)
    if args.json:
        out = dataclasses.asdict(info)
        out.update(executed=info.executed, cached=info.cached, facts=facts)
        return dumps(out)
    return render_run(info, facts)


def cmd_runs_diff(args: argparse.Namespace) -> str:
    from metadata.diff import diff_report
    from tfxp.cli.render import dumps, render_diff
    from tfxp.presentation.lineage_report import run_facts

    lin = open_lineage(args)
    a, b = lin.resolve_run(args.a), lin.resolve_run(args.b)
    report = diff_report(a, b, run_facts(lin, a), run_facts(lin, b))
    return dumps(report) if args.json else render_diff(report)


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `runs list|show|diff` to the `tfxp` parser."""
    runs = sub.add_parser("runs", help="pipeline runs recorded in ML Metadata")
    rsub = runs.add_subparsers(dest="runs_command", required=True)
    ls = rsub.add_parser("list", help="runs with status, span, model and executed/cached parts")
    add_store_query_flags(ls)
    ls.set_defaults(func=printed(cmd_runs_list))
    show = rsub.add_parser("show", help="one run: components, data, schema, code, metrics")
    show.add_argument("run", help="run id (a unique prefix will do) or 'latest'")
    add_store_query_flags(show)
    show.set_defaults(func=printed(cmd_runs_show))
    diff = rsub.add_parser("diff", help="what changed between two runs")
    diff.add_argument("a", help="run id (or 'latest')")
    diff.add_argument("b", help="run id (or 'latest')")
    add_store_query_flags(diff)
    diff.set_defaults(func=printed(cmd_runs_diff))


def main(argv: list[str] | None = None) -> int:
    """`python -m tfxp.cli.runs list` works without the `tfxp` edit too."""
    return standalone_main(register, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
