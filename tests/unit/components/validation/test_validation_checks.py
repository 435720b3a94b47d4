"""Unit tests of the gate's checks, thresholds file, baseline choice and report (no pipeline)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from tensorflow_metadata.proto.v0 import schema_pb2

from components.resolvers.previous_span_statistics import previous_span
from components.validation.checks import evaluate, with_comparators
from components.validation.findings import BLOCK, PASS, WARN
from components.validation.html_report import render_report
from components.validation.schema_importer import load_schema
from components.validation.serving_data import serving_statistics
from components.validation.settings import (
    ImageThresholds,
    ValidationConfigError,
    ValidationSettings,
    load_settings,
)
from data.generate import Drift, generate
from pipeline.datasets import dataset_config

CONFIG = dataset_config("taxi")
ROWS = 2000


@pytest.fixture(scope="module")
def schema() -> schema_pb2.Schema:
    return load_schema(CONFIG.schema_file)


@pytest.fixture(scope="module")
def settings() -> ValidationSettings:
    return load_settings(CONFIG.validation_file)


@pytest.fixture(scope="module")
def stats(tmp_path_factory, schema):
    """Statistics of generated drops: two clean ones, drifted, bad values, serving sets."""
    tmp = tmp_path_factory.mktemp("stats")

    def make(name, seed, drift=None, label=True, rows=ROWS, edit=None):
        [part] = generate(tmp / name, rows, seed=seed, drift=drift)
        if not label or edit:
            table = list(csv.reader(part.open(newline="")))
            if edit:
                edit(table)
            if not label:
                i = table[0].index("tips")
                table = [r[:i] + r[i + 1 :] for r in table]
            with part.open("w", newline="") as f:
                csv.writer(f, lineterminator="\n").writerows(table)
        return serving_statistics([str(part)], schema)[0]

    def hour_30(table):
        i = table[0].index("trip_start_hour")
        for row in table[1:11]:
            row[i] = "30"

    return {
        "a": make("a", 1),
        "b": make("b", 2),
        "drift": make(
            "drift", 3, Drift(shift={"fare": 10.0}, reweight={"payment_type": {"Cash": 3}})
        ),
        "bad": make("bad", 4, Drift(unseen={"payment_type": 0.05}), edit=hour_30),
        "serving": make("serving", 5, label=False, rows=1000),
        "skewed": make("skewed", 6, Drift(scale={"trip_miles": 3.0}), label=False, rows=1000),
    }


def test_thresholds_file_of_the_taxi_dataset(settings):
    assert settings.drift.for_feature("payment_type", categorical=True) == 0.1
    assert settings.drift.for_feature("fare", categorical=False) == 0.15
    assert settings.drift.for_feature("trip_start_timestamp", categorical=False) is None
    assert settings.warn_only == ()
    assert ValidationSettings.from_json(settings.to_json()) == settings


@pytest.mark.parametrize(
    "text, message",
    [
        ("drift: {categorical: 2}", "drift.categorical: expected a number in [0, 1]"),
        ("drift: {features: {fare: high}}", "drift.features.fare: expected a number"),
        ("warn_only: [drfit]", "unknown anomaly kind(s) ['drfit']"),
        ("skew: {numeric: off}", "default thresholds cannot be `off`"),
        ("thresholds: {}", "unknown key(s) ['thresholds']"),
        ("drift: [", "not valid YAML"),
        ("images: [0.5]", "images: expected a mapping"),
        ("images: {shrink: 0.5}", "images: unknown key(s) ['shrink']"),
        ("images: {shrink_ratio: 0}", "images.shrink_ratio: expected a number in (0, 1]"),
        ("images: {bytes_ratio: 1.5}", "images.bytes_ratio: expected a number in (0, 1]"),
        ("images: {grey_shift: half}", "images.grey_shift: expected a number in (0, 1]"),
        ("images: {format_shift: true}", "images.format_shift: expected a number in (0, 1]"),
    ],
)
def test_bad_thresholds_file_names_file_and_entry(tmp_path, text, message):
    path = tmp_path / "validation.yaml"
    path.write_text(text)
    with pytest.raises(ValidationConfigError) as e:
        load_settings(str(path))
    assert str(path) in str(e.value) and message in str(e.value)


# The gate's exec properties carry ValidationSettings.to_json(): a cache key. This is the
# JSON of a file without `images:` before that mapping existed; it must not change.
BEFORE_IMAGES = (
    '{"drift": {"categorical": 0.1, "features": {}, "numeric": 0.15}, '
    '"skew": {"categorical": 0.1, "features": {}, "numeric": 0.15}, "warn_only": ["drift"]}'
)


def test_files_without_images_keep_their_cache_key(tmp_path):
    path = tmp_path / "validation.yaml"
    path.write_text("warn_only: [drift]\n")
    assert load_settings(str(path)).to_json() == BEFORE_IMAGES
    path.write_text("warn_only: [drift]\nimages: {shrink_ratio: 0.7, bytes_ratio: 0.4}\n")
    assert load_settings(str(path)).to_json() == BEFORE_IMAGES  # the defaults, spelled out
    for name in ("taxi", "digits"):
        key = json.loads(load_settings(dataset_config(name).validation_file).to_json())
        assert set(key) == {"drift", "skew", "warn_only"}, name


def test_image_thresholds_from_the_file(tmp_path):
    path = tmp_path / "validation.yaml"
    path.write_text("images:\n  shrink_ratio: 0.4\n  grey_shift: 1\n")
    settings = load_settings(str(path))
    assert settings.images == ImageThresholds(shrink_ratio=0.4, grey_shift=1.0)
    assert json.loads(settings.to_json())["images"]["shrink_ratio"] == 0.4
    again = ValidationSettings.from_json(settings.with_warn_only(["drift"]).to_json())
    assert again.images == settings.images and again.warn_only == ("drift",)


def test_unknown_warn_only_kind_on_the_command_line(settings):
    with pytest.raises(ValidationConfigError, match="--warn-only"):
        settings.with_warn_only(["nonsense"])
    assert settings.with_warn_only(["drift"]).warn_only == ("drift",)


def test_comparators_per_feature_kind(schema, settings):
    out = with_comparators(schema, settings)
    f = {x.name: x for x in out.feature}
    assert f["payment_type"].drift_comparator.infinity_norm.threshold == pytest.approx(0.1)
    jsd = f["fare"].skew_comparator.jensen_shannon_divergence
    assert jsd.threshold == pytest.approx(0.15)
    assert jsd.source.type == schema_pb2.HistogramSelection.QUANTILES
    assert not f["trip_start_timestamp"].HasField("drift_comparator")
    assert f["pickup_community_area"].drift_comparator.jensen_shannon_divergence.threshold == (
        pytest.approx(0.25)
    )
    assert not schema.feature[0].HasField("drift_comparator")  # the input is not modified


def test_curated_schema_environments(schema):
    assert list(schema.default_environment) == ["TRAINING", "SERVING"]
    tips = next(f for f in schema.feature if f.name == "tips")
    assert list(tips.not_in_environment) == ["SERVING"]


def test_clean_first_span_passes_and_says_there_is_no_baseline(stats, schema, settings):
    r = evaluate({"train": stats["a"]}, schema, settings, serving=stats["serving"], current_span=1)
    assert r.decision == PASS and r.findings == []
    assert any("no baseline" in n for n in r.notes)
    assert {m.kind for m in r.measurements} == {"skew"}


def test_clean_span_passes_against_its_predecessor(stats, schema, settings):
    r = evaluate(
        {"train": stats["b"]},
        schema,
        settings,
        baseline={"train": stats["a"]},
        current_span=2,
        baseline_span=1,
    )
    assert r.decision == PASS, r.message()
    drift = {m.feature: m for m in r.measurements if m.kind == "drift"}
    assert {"fare", "payment_type", "trip_miles"} <= set(drift)
    assert all(not m.exceeded for m in drift.values())


def test_drift_blocks_with_measured_value_and_threshold(stats, schema, settings):
    r = evaluate(
        {"train": stats["drift"]},
        schema,
        settings,
        baseline={"train": stats["b"]},
        current_span=3,
        baseline_span=2,
    )
    assert r.decision == BLOCK
    drift = {f.feature: f for f in r.findings if f.kind == "drift"}
    assert set(drift) == {"fare", "payment_type"}
    assert drift["fare"].measure == "Jensen-Shannon" and drift["fare"].threshold == 0.15
    assert drift["fare"].measured > 0.15
    assert drift["payment_type"].measure == "L-infinity" and drift["payment_type"].measured > 0.1
    message = r.message()
    assert "drift fare: Jensen-Shannon" in message and "--warn-only drift" in message


def test_downgraded_kind_warns_instead(stats, schema, settings):
    r = evaluate(
        {"train": stats["drift"]},
        schema,
        settings.with_warn_only(["drift"]),
        baseline={"train": stats["b"]},
        current_span=3,
        baseline_span=2,
    )
    assert r.decision == WARN and r.blocking == []
    assert {f.feature for f in r.warnings} == {"fare", "payment_type"}
    assert "passed with 2 warning(s)" in r.message()


def test_skewed_serving_data_is_reported(stats, schema, settings):
    r = evaluate({"train": stats["a"]}, schema, settings, serving=stats["skewed"], current_span=1)
    skew = {f.feature: f for f in r.findings if f.kind == "skew"}
    assert "trip_miles" in skew and skew["trip_miles"].measured > 0.15
    # The label is absent from serving data and that is not an anomaly (SERVING environment).
    assert not any(f.feature == "tips" for f in r.findings)


def test_unseen_category_and_out_of_range_value_block(stats, schema, settings):
    r = evaluate({"train": stats["bad"], "eval": stats["bad"]}, schema, settings)
    found = {(f.feature, f.anomaly): f for f in r.findings}
    unseen = found[("payment_type", "ENUM_TYPE_UNEXPECTED_STRING_VALUES")]
    assert "unseen-payment_type" in unseen.description and unseen.where == "eval, train"
    big = found[("trip_start_hour", "INT_TYPE_BIG_INT")]
    assert (big.measure, big.measured, big.op, big.threshold) == ("max", 30, ">", 23)
    assert "schema trip_start_hour: max 30 > threshold 23;" in big.line()
    assert r.decision == BLOCK
    # An anomaly type can be downgraded on its own.
    only = settings.with_warn_only(["ENUM_TYPE_UNEXPECTED_STRING_VALUES"])
    r2 = evaluate({"train": stats["bad"]}, schema, only)
    assert {f.anomaly for f in r2.blocking} == {"INT_TYPE_BIG_INT"}


def _artifact(kind, id_: int, span: int | None = None, version: int | None = None, base=None):
    from tfx.types import standard_artifacts

    a = getattr(standard_artifacts, kind)()
    a.id = id_
    if span is not None:
        a.set_int_custom_property("span", span)
    if version is not None:
        a.set_int_custom_property("version", version)
    if base is not None:
        a.set_string_custom_property("input_base", base)
    return a


def test_baseline_is_the_highest_earlier_span_with_statistics():
    examples = [
        _artifact("Examples", 1, span=1, base="/d"),
        _artifact("Examples", 2, span=2, base="/d"),
        _artifact("Examples", 3, span=2, version=1, base="/d"),  # a newer version of span 2
        _artifact("Examples", 4, span=3, base="/d"),
        _artifact("Examples", 5, span=2, base="/other"),  # another data folder
        _artifact("Examples", 6, span=2, version=2, base="/d"),  # never got statistics
    ]
    stats = [_artifact("ExampleStatistics", i) for i in (11, 12, 13, 14, 15, 16)]
    sources = {11: 1, 12: 2, 13: 3, 14: 4, 15: 5, 16: 3}  # 16: span 2 v1 recomputed
    found = previous_span(examples, stats, sources, 3, "/d")
    assert [a.id for a in found[0]] == [3] and [a.id for a in found[1]] == [16]
    found = previous_span(examples, stats, sources, 2, "/d")
    assert [a.id for a in found[0]] == [1] and [a.id for a in found[1]] == [11]
    assert previous_span(examples, stats, sources, 1, "/d") == ([], [])


def _external_references(page: str) -> list[str]:
    from html.parser import HTMLParser

    found: list[str] = []

    class Refs(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.extend(f"{tag} {k}={v}" for k, v in attrs if k in ("src", "href") and v)

    Refs().feed(page)
    return found


def test_report_page_has_tables_charts_and_decision(stats, schema, settings):
    r = evaluate(
        {"train": stats["drift"]},
        schema,
        settings,
        baseline={"train": stats["b"]},
        serving=stats["serving"],
        current_span=3,
        baseline_span=2,
    )
    page = render_report(
        r,
        current={"train": stats["drift"]},
        baseline={"train": stats["b"]},
        serving=stats["serving"],
        settings=settings,
        title="taxi run x",
    )
    assert 'id=decision class=decision style="background:#cf222e">BLOCK' in page
    assert page.count("class='anomaly-row blocks'") == len(r.blocking)
    assert "<table id=drift-table>" in page and "<table id=skew-table>" in page
    assert page.count("class=chart ") >= 15  # a chart per feature with values
    # Offline: plotly's code is inlined; no tag loads anything from elsewhere.
    assert _external_references(page) == []
    assert "Plotly.newPlot" in page


@pytest.mark.slow  # a real browser
def test_report_renders_in_chromium(stats, schema, settings, tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "support"))
    from browser import open_report

    r = evaluate(
        {"train": stats["bad"]},
        schema,
        settings,
        baseline={"train": stats["a"]},
        current_span=4,
        baseline_span=1,
    )
    path = tmp_path / "report.html"
    html = render_report(
        r,
        current={"train": stats["bad"]},
        baseline={"train": stats["a"]},
        serving=None,
        settings=settings,
        title="t",
    )
    path.write_text(html)
    page = open_report(path)
    assert page.errors == []
    assert page.decision == "BLOCK"
    # Every chart drew its SVG (one per feature with values).
    assert page.chart_svgs == html.count("class=chart ") >= 15
    assert (page.anomaly_rows[0][:4]) == [
        "blocks",
        "schema",
        "payment_type",
        "ENUM_TYPE_UNEXPECTED_STRING_VALUES",
    ] or any(row[2] == "payment_type" for row in page.anomaly_rows)
    assert len(page.anomaly_rows) == len(r.findings)


def test_malformed_serving_data_is_a_clear_error(tmp_path, schema):
    from components.example_gen.csv_checks import CsvInputError

    bad = tmp_path / "requests.csv"
    rows = (Path(CONFIG.serving_pattern).parent / "requests.csv").read_text().splitlines()
    bad.write_text("\n".join([rows[0], rows[1], "1,2,3", rows[2]]) + "\n")
    with pytest.raises(CsvInputError) as e:
        serving_statistics([str(bad)], schema)
    assert f"{bad}:3: has 3 fields, the header has 17" in str(e.value)
    extra = tmp_path / "extra.csv"
    extra.write_text(rows[0] + ",user_id\n" + rows[1] + ",7\n")
    with pytest.raises(ValueError, match="columns not in the schema: \\['user_id'\\]"):
        serving_statistics([str(extra)], schema)


def test_shipped_serving_requests_have_no_label_and_fit_the_schema(schema, settings):
    stats, rows = serving_statistics(
        [str(p) for p in Path(CONFIG.data_root, "serving").glob("*.csv")], schema
    )
    assert rows == 2000
    names = {".".join(f.path.step) for f in stats.datasets[0].features}
    assert "tips" not in names and "fare" in names
    # Against the embedded span 1 the shipped requests show no skew at the defaults.
    span1, _ = serving_statistics([str(Path(CONFIG.data_root, "span-1", "data.csv"))], schema)
    r = evaluate({"train": span1}, schema, settings, serving=stats, serving_rows=rows)
    assert r.decision == PASS, r.message()


def test_report_lookup(tmp_path):
    from metadata.gate_report import ReportError, find_report

    config = dataset_config("taxi").replace(run_dir=str(tmp_path))
    with pytest.raises(ReportError, match="run the pipeline first"):
        find_report(config)
    folder = Path(config.report_dir)
    folder.mkdir()
    (folder / "a.html").write_text("a")
    (folder / "b.html").write_text("b")
    import os

    os.utime(folder / "a.html", (1, 1))
    assert Path(find_report(config)).name == "b.html"
    assert Path(find_report(config, "a")).name == "a.html"
    with pytest.raises(ReportError, match="no validation report for run zz"):
        find_report(config, "zz")


def test_unknown_warn_only_kind_fails_the_run_command_before_work(tmp_path, capsys):
    from tfxp.cli import main

    code = main(["run", "--run-dir", str(tmp_path / "run"), "--warn-only", "drfit"])
    assert code == 1
    assert "unknown anomaly kind(s) ['drfit']" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
