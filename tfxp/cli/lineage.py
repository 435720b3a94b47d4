"""`tfxp lineage`: which data trained which model, answered from ML Metadata alone.

    tfxp lineage model <id|latest|pushed|run>   Model <- Trainer <- Transform <- Examples <- raw files
    tfxp lineage data <dataset> <span>     the models trained on a span, blessed or pushed or not
    tfxp lineage scored [--span N]         which model scored which span (`tfxp infer`, BatchInference)

Every command reads the run directory's metadata.sqlite (--run-dir, default
runs/<pipeline>) or a MySQL store (--mysql-host/--mysql-port/--mysql-database/
--mysql-user, password in MLMD_MYSQL_PASSWORD); `--json` prints stable JSON
(sorted keys); `--graph FILE.svg|.html|.png|.dot` also draws the lineage.
"""

from __future__ import annotations

import argparse
import sys

from pipeline.datasets import dataset_names
from tfxp.cli.common import add_store_query_flags, open_lineage, printed, standalone_main


def _graph(args: argparse.Namespace, graph, details: str) -> str:
    from tfxp.presentation.graph import write_graph

    path = write_graph(graph, args.graph, details)
    return f"graph: {path}"


def _with_graph(args: argparse.Namespace, as_dict: dict, graph, text: str) -> str:
    """The command's output (table or --json), plus the --graph file's note.

    `graph` builds the drawing (tfxp/presentation/lineage_report.py), only when --graph asks.
    """
    from tfxp.cli.render import dumps

    out = dumps(as_dict) if args.json else text
    if args.graph:
        note = _graph(args, graph(), text)
        # With --json, stdout stays pure JSON; the note goes to stderr.
        if args.json:
            print(note, file=sys.stderr)
        else:
            out += "\n" + note
    return out


def cmd_lineage_model(args: argparse.Namespace) -> str:
    from tfxp.cli.render import render_model
    from tfxp.presentation.lineage_report import model_graph

    lin = open_lineage(args)
    model = lin.resolve_model(args.model)
    lineage = lin.model_lineage(model)
    return _with_graph(
        args, lineage.to_dict(), lambda: model_graph(lin, lineage), render_model(lineage)
    )


def cmd_lineage_data(args: argparse.Namespace) -> str:
    from tfxp.cli.render import render_span
    from tfxp.presentation.lineage_report import span_graph

    lin = open_lineage(args, args.dataset)
    result = lin.span_lineage(args.span, args.version)
    return _with_graph(args, result.to_dict(), lambda: span_graph(result), render_span(result))


def cmd_lineage_scored(args: argparse.Namespace) -> str:
    from metadata.scorings import render_scorings, scorings_or_error
    from tfxp.cli.render import dumps

    found = scorings_or_error(open_lineage(args), args.span)
    if args.json:
        return dumps({"scorings": [s.to_dict() for s in found]})
    return render_scorings(found)


def _graph_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--graph",
        metavar="FILE",
        help="also draw the lineage: .svg, .html (self-contained), .png or .dot",
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Adds `lineage model|data|scored` to the `tfxp` parser."""
    lineage = sub.add_parser("lineage", help="which data trained which model")
    lsub = lineage.add_subparsers(dest="lineage_command", required=True)
    model = lsub.add_parser("model", help="a model's data, schema, code, blessing and push")
    model.add_argument("model", help="Model artifact id, 'latest', 'pushed', or a run id")
    add_store_query_flags(model)
    _graph_flag(model)
    model.set_defaults(func=printed(cmd_lineage_model))
    data = lsub.add_parser("data", help="the models trained on one span")
    data.add_argument("dataset", choices=dataset_names())
    data.add_argument("span", type=int)
    data.add_argument("--version", type=int, help="only this version of the span")
    add_store_query_flags(data, dataset_flag=False)
    _graph_flag(data)
    data.set_defaults(func=printed(cmd_lineage_data))
    scored = lsub.add_parser("scored", help="which model scored which span (batch inference)")
    scored.add_argument("--span", type=int, help="only the scorings of this span")
    add_store_query_flags(scored)
    scored.set_defaults(func=printed(cmd_lineage_scored))


def main(argv: list[str] | None = None) -> int:
    """`python -m tfxp.cli.lineage model latest` works without the `tfxp` edit too."""
    return standalone_main(register, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
