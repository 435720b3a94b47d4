"""benchmarks/tabular_quality.py's pieces without a pipeline: the tables it writes, the
anchor's scoring on given split rows, the target verdicts and the page's rendering."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[3]


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return _module("tabular_quality")


def test_every_table_writes_a_csv_with_its_label(bench, tmp_path):
    assert len({t.name for t in bench.TABLES}) == len(bench.TABLES)
    for table in bench.TABLES:
        path = tmp_path / f"{table.name}.csv"
        table.write(path)
        with path.open() as f:
            rows = list(csv.DictReader(f))
        assert len(rows) >= 100 and table.label in rows[0], table.name
        labels = {r[table.label] for r in rows}
        if table.task == "regression":
            assert len(labels) > 50
        else:
            assert 2 <= len(labels) <= 5, (table.name, labels)
    with (tmp_path / "imbalanced.csv").open() as f:
        positives = np.mean([r["churned"] == "yes" for r in csv.DictReader(f)])
    assert 0.03 < positives < 0.1


def _rows(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        x, colour = rng.normal(), rng.choice(["red", "blue"])
        rows.append(
            {
                "x": None if rng.random() < 0.1 else float(x),
                "colour": str(colour),
                "y": "yes" if (x > 0) == (colour == "red") else "no",
                "v": 3.0 * x + (colour == "red"),
            }
        )
    return rows


def test_the_anchor_learns_from_numbers_blanks_and_strings(bench):
    from threadpoolctl import threadpool_limits

    # One OpenMP thread: on a shared 2-core machine more make these small fits seconds each.
    with threadpool_limits(1):
        _anchor_checks(bench)


def _anchor_checks(bench):
    splits = {"train": _rows(1500, 1), "eval": _rows(500, 2)}
    features = {"x": {"treatment": "zscore"}, "colour": {"treatment": "vocabulary"}}
    scores, _ = bench.anchor_score(splits, features, "y", "binary")
    # An XOR of a number and a string: only a model reading both gets it (blanks aside).
    assert 0.85 < scores["accuracy"] <= 1.0
    assert 0.85 < scores["balanced accuracy"] <= 1.0
    regression, _ = bench.anchor_score(splits, features, "v", "regression")
    assert regression["rmse"] < 0.5 * np.std([r["v"] for r in splits["eval"]])
    # A string value the train rows never had is scored, not refused.
    splits["eval"][0]["colour"] = "green"
    assert bench.anchor_score(splits, features, "y", "binary")[0]["accuracy"] > 0.85


def test_the_targets(bench):
    assert bench.meets_target("binary", 0.891, 0.9) and not bench.meets_target("binary", 0.889, 0.9)
    assert bench.meets_target("regression", 10.4, 10.0)
    assert not bench.meets_target("regression", 10.6, 10.0)


def test_the_page_renders_every_table(bench):
    render = _module("render_results").render_tabular_quality
    mlp = {"value": 0.9, "vs_anchor": 0.989, "meets_target": False}
    row = {
        "about": "a table", "task": "binary", "rows": {"train": 2000, "eval": 1000},
        "metric": "accuracy", "default_model": "gbt", "anchor": 0.91, "mlp": mlp,
        "gbt": {"value": 0.905, "vs_anchor": 0.995, "meets_target": True},
    }  # fmt: skip
    result = {
        "tables": {"t1": row, "t2": {**row, "about": "another"}},
        "ours_met": 2,
        "mlp_met": 0,
        "gbt_met": 2,
        "targets": {"accuracy_points": 0.01, "rmse_ratio": 1.05},
    }
    text = "\n".join(render(result))
    assert (
        "| t1 | accuracy | 2,000 / 1,000 | 0.9100 | 0.9000 (0.989, not met) "
        "| **0.9050** (0.995, met) | gbt | n/a / n/a / n/a |"
    ) in text
    assert "- t2: another" in text
    assert "(in bold) on 2 of 2 tables, by the MLP on 0, by gbt on 2" in text
