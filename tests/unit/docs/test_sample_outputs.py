"""The sample outputs in the README and the docs are the pipeline's own: a run's summary
names every node pipeline/definition.py builds, its progress counts them, and the metrics
shown are the ones the taxi EvalConfig computes (pasted from real runs, so a pipeline
change that leaves them stale fails here)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.plan import plan_run

ROOT = Path(__file__).resolve().parents[3]
STATES = ("complete", "cached", "resolved", "failed", "skipped")


@pytest.fixture(scope="module")
def taxi(tmp_path_factory) -> tuple[set[str], set[str]]:
    """(the node ids, the metric names) of `make run`'s pipeline."""
    from pipeline import definition
    from pipeline.datasets import dataset_config
    from pipeline.eval_config import eval_config

    config = dataset_config("taxi").replace(run_dir=str(tmp_path_factory.mktemp("run")))
    nodes = {c.id for c in definition.create_pipeline(plan_run(config)).components}
    metrics = {
        metric_name(m.class_name)
        for spec in eval_config(config).metrics_specs
        for m in spec.metrics
        if not m.class_name.endswith("Plot")  # plots are drawn (console, card), not printed
    }
    return nodes, metrics


def metric_name(class_name: str) -> str:
    """TFMA's metric name for a Keras/TFMA metric class: BinaryAccuracy -> binary_accuracy."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", class_name).lower()


def blocks(path: Path) -> list[str]:
    """The fenced code blocks of a Markdown file."""
    return re.findall(r"```[a-z]*\n(.*?)```", path.read_text(), flags=re.S)


def block_with(path: Path, text: str) -> str:
    found = [b for b in blocks(path) if text in b]
    assert found, f"{path.name}: no code block shows {text!r}"
    return found[0]


def summary_nodes(block: str) -> set[str]:
    """The nodes of a run summary's component lines (`  Trainer   complete   2.1s`)."""
    pattern = rf"^\s+(\w+)\s+(?:{'|'.join(STATES)})\b"
    return set(re.findall(pattern, block, flags=re.M))


def progress_counts(block: str) -> set[int]:
    """The N of every `[k/N]` progress line."""
    return {int(n) for n in re.findall(r"^\s*\[\d+/(\d+)\]", block, flags=re.M)}


def eval_metric_names(block: str) -> set[str]:
    line = re.search(r"^eval metrics: (.*)$", block, flags=re.M)
    assert line, "no `eval metrics:` line"
    return set(re.findall(r"(\w+) -?[\d.]+", line.group(1)))


def test_the_helpers_read_what_a_run_prints():
    block = "[1/3] A ...\n  A    complete   1.0s\n  r    resolved\neval metrics: auc 0.9, fall_out 0.1\n"
    assert summary_nodes(block) == {"A", "r"} and progress_counts(block) == {3}
    assert eval_metric_names(block) == {"auc", "fall_out"}
    assert metric_name("AUC") == "auc" and metric_name("FallOut") == "fall_out"


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_a_runs_summary_shows_every_node_and_metric(taxi, page):
    nodes, metrics = taxi
    block = block_with(ROOT / page, "eval metrics:")
    assert summary_nodes(block) == nodes
    assert eval_metric_names(block) == metrics
    assert progress_counts(block) in (set(), {len(nodes)})


def test_getting_started_describes_every_node(taxi):
    nodes, _ = taxi
    text = (ROOT / "docs" / "getting-started.md").read_text()
    rows = re.findall(r"^\| ([^|]+) \|", text, flags=re.M)
    described = {name.split(" (")[0] for row in rows for name in row.split(", ")}
    assert nodes <= described


def test_the_watchers_worked_example_runs_the_whole_pipeline(taxi):
    nodes, metrics = taxi
    page = ROOT / "docs" / "continuous.md"
    watch = block_with(page, "$ cat /tmp/ct/ex/watch.out")
    assert progress_counts(watch) == {len(nodes)}
    # Span 1's run is shown whole: one progress line pair per node.
    first = watch.split("span 1: trained")[0]
    assert set(re.findall(r"\[\d+/\d+\] (\w+) \.\.\.", first)) == nodes
    alerts = block_with(page, "pushed as champion")
    first_alert = alerts.split("---")[1]
    assert set(re.findall(r"^(\w+) -?[\d.]+$", first_alert, flags=re.M)) == metrics
    lineage = block_with(page, "$ tfxp lineage model champion")
    line = re.search(r"^  metrics +(.*)$", lineage, flags=re.M).group(1)
    shown = set(re.findall(r"(\w+) -?[\d.]+", line))
    assert {m for m in shown if not m.endswith("_diff")} == metrics
