"""`tfxp runs` and `tfxp lineage`: questions answered from ML Metadata alone.

    tfxp runs list                         run id, start, duration, status, span, model, verdicts
    tfxp runs show <run|latest>            components (executed/cached), data, schema, code, metrics
    tfxp runs diff <run-a> <run-b>         what changed: data, schema, code, hyperparameters, metrics
    tfxp lineage model <id|latest|pushed|run>   Model <- Trainer <- Transform <- Examples <- raw files
    tfxp lineage data <dataset> <span>     the models trained on a span, blessed or pushed or not
    tfxp lineage scored [--span N]         which model scored which span (`tfxp infer`, BatchInference)

Every command reads the run directory's metadata.sqlite (--run-dir, default
runs/<pipeline>) or a MySQL store (--mysql-host/--mysql-port/--mysql-database/
--mysql-user, password in MLMD_MYSQL_PASSWORD); `--json` prints stable JSON
(sorted keys); `lineage` takes `--graph FILE.svg|.html|.png|.dot`.
"""

from __future__ import annotations

import argparse
import os
import sys

from pipeline.datasets import dataset_config, dataset_names
from tfxp.metadata.store import (
    MetadataStoreError,
    add_store_flags,
    location_from_args,
    open_store,
)


def _lineage(args: argparse.Namespace, dataset: str | None = None):
    from tfxp.metadata.lineage import Lineage

    config = dataset_config(dataset or args.dataset)
    location = location_from_args(args, config.local_dir)
    store = open_store(location)
    return Lineage(store, config.pipeline_name, location.describe())


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

    from tfxp.metadata.render import dumps, render_runs

    lin = _lineage(args)
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

    from tfxp.metadata.render import dumps, render_run

    lin = _lineage(args)
    run_id = lin.resolve_run(args.run)
    info = lin.run_info(run_id)
    facts = lin.run_facts(run_id)
    if args.json:
        out = dataclasses.asdict(info)
        out.update(executed=info.executed, cached=info.cached, facts=facts)
        return dumps(out)
    return render_run(info, facts)


def cmd_runs_diff(args: argparse.Namespace) -> str:
    from tfxp.metadata.diff import diff_report
    from tfxp.metadata.render import dumps, render_diff

    lin = _lineage(args)
    a, b = lin.resolve_run(args.a), lin.resolve_run(args.b)
    report = diff_report(a, b, lin.run_facts(a), lin.run_facts(b))
    return dumps(report) if args.json else render_diff(report)


def _graph(args: argparse.Namespace, graph, details: str) -> str:
    from tfxp.metadata.graph import write_graph

    path = write_graph(graph, args.graph, details)
    return f"graph: {path}"


def _with_graph(args: argparse.Namespace, as_dict: dict, graph, text: str) -> str:
    """The command's output (table or --json), plus the --graph file's note."""
    from tfxp.metadata.render import dumps

    out = dumps(as_dict) if args.json else text
    if args.graph:
        note = _graph(args, graph, text)
        # With --json, stdout stays pure JSON; the note goes to stderr.
        if args.json:
            print(note, file=sys.stderr)
        else:
            out += "\n" + note
    return out


def cmd_lineage_model(args: argparse.Namespace) -> str:
    from tfxp.metadata.render import render_model

    lin = _lineage(args)
    model = lin.resolve_model(args.model)
    lineage = lin.model_lineage(model, with_graph=bool(args.graph))
    return _with_graph(args, lineage.to_dict(), lineage.graph, render_model(lineage))


def cmd_lineage_data(args: argparse.Namespace) -> str:
    from tfxp.metadata.render import render_span

    lin = _lineage(args, args.dataset)
    result = lin.span_lineage(args.span, args.version, with_graph=bool(args.graph))
    return _with_graph(args, result.to_dict(), result.graph, render_span(result))


def cmd_lineage_scored(args: argparse.Namespace) -> str:
    from tfxp.metadata.render import dumps
    from tfxp.metadata.scorings import render_scorings, scorings_or_error

    found = scorings_or_error(_lineage(args), args.span)
    if args.json:
        return dumps({"scorings": [s.to_dict() for s in found]})
    return render_scorings(found)


def _run(func):
    def wrapped(args: argparse.Namespace) -> int:
        from tfxp.metadata.store import LineageError

        try:
            text = func(args)
        except (LineageError, MetadataStoreError, ValueError) as e:
            message = " ".join(str(e).split())  # one line, whatever the cause
            print(f"ERROR: {message}", file=sys.stderr)
            return 1
        print(text)
        return 0

    return wrapped


def _common(p: argparse.ArgumentParser, *, dataset_flag: bool = True) -> None:
    if dataset_flag:
        p.add_argument(
            "--dataset",
            default="taxi",
            choices=dataset_names(),
            help="which pipeline's runs (default taxi)",
        )
    p.add_argument("--json", action="store_true", help="stable JSON (sorted keys) for scripts")
    add_store_flags(p, default_run_dir_help=" (default: the dataset's, runs/taxi)")


def _graph_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--graph",
        metavar="FILE",
        help="also draw the lineage: .svg, .html (self-contained), .png or .dot",
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `runs list|show|diff` and `lineage model|data` to the `tfxp` parser."""
    runs = sub.add_parser("runs", help="pipeline runs recorded in ML Metadata")
    rsub = runs.add_subparsers(dest="runs_command", required=True)
    ls = rsub.add_parser("list", help="runs with status, span, model and executed/cached parts")
    _common(ls)
    ls.set_defaults(func=_run(cmd_runs_list))
    show = rsub.add_parser("show", help="one run: components, data, schema, code, metrics")
    show.add_argument("run", help="run id (a unique prefix will do) or 'latest'")
    _common(show)
    show.set_defaults(func=_run(cmd_runs_show))
    diff = rsub.add_parser("diff", help="what changed between two runs")
    diff.add_argument("a", help="run id (or 'latest')")
    diff.add_argument("b", help="run id (or 'latest')")
    _common(diff)
    diff.set_defaults(func=_run(cmd_runs_diff))

    lineage = sub.add_parser("lineage", help="which data trained which model")
    lsub = lineage.add_subparsers(dest="lineage_command", required=True)
    model = lsub.add_parser("model", help="a model's data, schema, code, blessing and push")
    model.add_argument("model", help="Model artifact id, 'latest', 'pushed', or a run id")
    _common(model)
    _graph_flag(model)
    model.set_defaults(func=_run(cmd_lineage_model))
    data = lsub.add_parser("data", help="the models trained on one span")
    data.add_argument("dataset", choices=dataset_names())
    data.add_argument("span", type=int)
    data.add_argument("--version", type=int, help="only this version of the span")
    _common(data, dataset_flag=False)
    _graph_flag(data)
    data.set_defaults(func=_run(cmd_lineage_data))
    scored = lsub.add_parser("scored", help="which model scored which span (batch inference)")
    scored.add_argument("--span", type=int, help="only the scorings of this span")
    _common(scored)
    scored.set_defaults(func=_run(cmd_lineage_scored))


def main(argv: list[str] | None = None) -> int:
    """`python -m tfxp.cli.lineage runs list` works without the `tfxp` edit too."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    parser = argparse.ArgumentParser(prog="tfxp", description=__doc__)
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
