"""Rolling windows: the older spans of a window, ingested before the run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pipeline.node_ids import example_gen_id
from pipeline.plan import RunPlan, window_span_plan
from tfxp.local.runner import run_local

# Rolling windows: ExampleGen ingests one span per execution (TFX 1.16's
# FileBasedInputProcessor accepts a single span), so a window's older spans are
# ingested by ExampleGen-only runs first; the window resolver then gathers them.


def ingest_older_spans(
    plan: RunPlan,
    printer: Callable[[str], None] = print,
    metadata_connection_config: Any | None = None,
) -> None:
    """Makes sure every older span of the plan's window has been ingested.

    Each is an ExampleGen-only partial run pinned to that span, on the plan's own
    facts (`window_span_plan`: the folder is not listed again); spans already
    ingested with the same content are cached (no Beam work).
    """
    config = plan.config
    if config.window <= 1:
        return
    for s in plan.spans[:-1]:
        printer(f"window: ingesting {s.label} ({s.path})")
        run_local(
            window_span_plan(plan, s),
            to_nodes=[example_gen_id(config)],
            metadata_connection_config=metadata_connection_config,
            printer=lambda line: printer("  " + line),
        )
