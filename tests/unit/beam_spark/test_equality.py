"""beam_spark gives what Beam's FnApiRunner gives: outputs, metrics, files, and failures.

One pipeline covers CombinePerKey, GroupByKey with many values per key, the four side-input
views, CoGroupByKey, tagged outputs, Reshuffle, BatchElements, Shared, a global combine,
counters and distributions, WriteToText and WriteToTFRecord; a second reads the text (an
SDF split across tasks) and the records back. Each runs once per runner for the module.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
import spark_pipelines as sp
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from beam_spark.runner import BeamSparkError, SparkRunner

LABELS = [
    "combine",
    "gbk",
    "side",
    "cogroup",
    "even",
    "odd",
    "reshuffle",
    "batches",
    "shared",
    "global",
]


def _metrics(result: Any) -> dict[str, Any]:
    found = result.metrics().query(MetricsFilter().with_namespace("beam_spark_test"))
    counters = {c.key.metric.name: c.committed for c in found["counters"]}
    distributions = {
        d.key.metric.name: (d.committed.count, d.committed.sum, d.committed.min, d.committed.max)
        for d in found["distributions"]
    }
    return {"counters": counters, "distributions": distributions}


def _run(runner: Any, build: Any, out_dir: Path) -> Any:
    pipeline = beam.Pipeline(runner=runner)
    build(pipeline, str(out_dir))
    result = pipeline.run()
    result.wait_until_finish()
    return result


@pytest.fixture(scope="module")
def runs(spark_local: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, runner in (("fn", FnApiRunner()), ("spark", SparkRunner(spark_context=spark_local))):
        out = tmp_path_factory.mktemp(name)
        main = _run(runner, sp.build_main, out)
        read = _run(runner, sp.build_read, out)
        found[name] = {
            "out": out,
            "main": sp.read_lines(str(out), "main"),
            "read": sp.read_lines(str(out), "read"),
            "metrics": _metrics(main),
            "result": main,
            "read_result": read,
        }
    return found


@pytest.mark.parametrize("label", LABELS)
def test_outputs_equal_the_fn_api_runners(runs: dict[str, Any], label: str) -> None:
    expected = runs["fn"]["main"][label]
    assert expected, f"the FnApiRunner produced no {label!r} output"
    assert runs["spark"]["main"][label] == expected


def test_group_by_key_holds_every_value(runs: dict[str, Any]) -> None:
    groups = dict(json.loads(line) for line in runs["spark"]["main"]["gbk"])
    assert sorted(len(v) for v in groups.values()) == [66, 67, 67]
    assert sorted(n for v in groups.values() for n in v) == list(range(200))


def test_counters_and_distributions_merge_exactly(runs: dict[str, Any]) -> None:
    assert runs["spark"]["metrics"] == runs["fn"]["metrics"]
    assert runs["spark"]["metrics"]["counters"]["seen"] == len(sp.WORDS)


def test_text_and_tfrecord_files_read_back_equal(runs: dict[str, Any]) -> None:
    spark, fn = runs["spark"]["read"], runs["fn"]["read"]
    assert spark["text"] == fn["text"] and len(spark["text"]) == 200
    assert spark["records"] == fn["records"] and len(spark["records"]) == 200


def test_sinks_leave_only_final_files(runs: dict[str, Any]) -> None:
    out = runs["spark"]["out"]
    assert len(list(out.glob("text-*-of-00004"))) == 4
    assert len(list(out.glob("records-*-of-00003"))) == 3
    assert not [p for p in out.rglob("*") if "temp" in p.name.lower()]


def test_consecutive_stages_share_spark_jobs(runs: dict[str, Any]) -> None:
    """Jobs end only where a side input is read, not at every fused stage."""
    for name in ("result", "read_result"):
        spark = runs["spark"][name].spark
        assert 1 <= spark["jobs"] < spark["fused_stages"] / 2, spark


def test_every_task_reports_where_its_python_time_went(runs: dict[str, Any]) -> None:
    """The harness's timers come back with the result: a task per partition of every
    stage, each stage's harness built at least once, bundles timed."""
    result = runs["spark"]["result"]
    total, stages = result.timings["total"], result.timings["stages"]
    assert total["tasks"] == sum(s["tasks"] for s in stages.values()) > 0
    assert len(stages) == result.spark["fused_stages"]
    assert all(s["cold"] >= 1 and s["workers"] >= 1 for s in stages.values()), stages
    assert total["bundles"] > 0 and total["python_workers"] >= 1


def test_a_task_failing_once_is_retried_with_exact_output(spark_local: Any, tmp_path: Path) -> None:
    marker = tmp_path / "failed"
    pipeline = beam.Pipeline(runner=SparkRunner(spark_context=spark_local))
    doubled = (
        pipeline
        | beam.Create(list(range(20)))
        | beam.ParDo(sp.FailOnce(str(marker)))
        | beam.Map(sp.labelled("doubled"))
    )
    _ = doubled | beam.io.WriteToText(str(tmp_path / "out"))
    result = pipeline.run()
    assert marker.exists(), "the DoFn never failed: the retry was not exercised"
    assert sp.read_lines(str(tmp_path), "out")["doubled"] == sorted(str(n * 2) for n in range(20))
    seen = result.metrics().query(MetricsFilter().with_name("fail_once_seen"))["counters"]
    assert [c.committed for c in seen] == [20]


def test_a_dofn_always_failing_names_stage_and_traceback(spark_local: Any) -> None:
    pipeline = beam.Pipeline(runner=SparkRunner(spark_context=spark_local))
    _ = pipeline | beam.Create([1, 2, 3]) | "Unwelcome" >> beam.Map(sp.explode_on_purpose)
    with pytest.raises(BeamSparkError) as raised:
        pipeline.run()
    message = str(raised.value)
    assert "explode_on_purpose" in message and "is not welcome" in message
    assert "Unwelcome" in message
    assert "Py4JJavaError" not in message and "at org.apache.spark" not in message


def test_a_module_folder_added_after_the_context_started_reaches_the_executors(
    spark_local: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TFX imports a module file by putting its folder on sys.path when a component runs,
    after a context kept from an earlier component started its executors."""
    folder = tmp_path / "late_modules"
    folder.mkdir()
    (folder / "beam_spark_late_module.py").write_text("def double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(folder))
    from beam_spark_late_module import double  # type: ignore[import-not-found]

    out = tmp_path / "out"
    with beam.Pipeline(runner=SparkRunner(spark_context=spark_local)) as p:
        _ = p | beam.Create([1, 2, 3]) | beam.Map(double) | beam.io.WriteToText(str(out))
    lines = sorted(int(line) for f in tmp_path.glob("out*") for line in f.read_text().split())
    assert lines == [2, 4, 6]
