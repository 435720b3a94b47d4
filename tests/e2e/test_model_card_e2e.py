"""The serving check and the model card on the session's taxi runs (`taxi_runs`).

The first run's model passed the serving check and was pushed; its card sits
beside the pushed version, is recorded in ML Metadata, and opens in headless
Chromium (no network) with every slice's metrics and no console error.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _store(config):
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    cfg = metadata_store_pb2.ConnectionConfig()
    cfg.sqlite.filename_uri = config.metadata_path
    return metadata_store.MetadataStore(cfg)


def test_the_real_model_passes_the_serving_check_with_its_figures(taxi_runs):
    first = taxi_runs.first
    assert first.pushed and first.serving_check.startswith("passed"), first.serving_check
    checks = _store(taxi_runs.config).get_artifacts_by_type("InfraBlessing")
    assert checks
    props = checks[0].custom_properties
    assert props["blessed"].int_value == 1 and props["verdict"].string_value == "passed"
    assert props["rows"].int_value == taxi_runs.config.serving_check_rows
    assert props["max_abs_diff"].double_value <= 1e-6
    assert props["load_seconds"].double_value > 0
    for size in (1, 64):
        p50 = props[f"latency_batch_{size}_p50_ms"].double_value
        p99 = props[f"latency_batch_{size}_p99_ms"].double_value
        assert 0 < p50 <= p99


def test_the_pushed_model_has_its_card_beside_it_and_in_metadata(taxi_runs):
    pushed = Path(taxi_runs.first.pushed_model)
    assert (pushed / "model_card.html").is_file()
    assert (pushed / "saved_model.pb").is_file()
    cards = _store(taxi_runs.config).get_artifacts_by_type("tfxp.ModelCard")
    beside = {
        c.custom_properties["pushed_card"].string_value
        for c in cards
        if "pushed_card" in c.custom_properties
    }
    assert str(pushed / "model_card.html") in beside


def test_the_card_opens_in_the_browser_with_per_slice_metrics(taxi_runs):
    from browser import open_model_card

    card = open_model_card(Path(taxi_runs.first.pushed_model) / "model_card.html")
    assert card.errors == []
    assert card.chart_svgs >= 1
    assert "blessed" in card.verdict
    assert {"example_count", "binary_accuracy", "fall_out", "miss_rate"} <= set(card.headers)
    # Every slice the Evaluator wrote is on the card, with its numbers.
    evaluation = min(
        Path(taxi_runs.config.pipeline_root).glob("Evaluator/evaluation/*"),
        key=lambda p: int(p.name),
    )
    slices = json.loads((evaluation / "slices.json").read_text())["metrics"]
    assert {"overall", "payment_type=Cash", "trip_miles_bucket=<1"} <= set(card.slice_rows)
    assert set(card.slice_rows) == set(slices)
    column = card.headers.index("binary_accuracy")
    for name, models in slices.items():
        shown = card.slice_rows[name][column]
        assert shown == f"{models['']['binary_accuracy']:.4f}", name
    assert "passed" in card.serving_check and "latency batch 64 p99" in card.serving_check
