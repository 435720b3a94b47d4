"""A run is planned once (pipeline/plan.py): each runner selects the spans one time,
and the definition builds its graph from the plan without reading anything."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

import pipeline.spans
from pipeline.config import PROJECT_ROOT
from pipeline.definition import create_pipeline
from pipeline.node_ids import SCHEMA_IMPORTER
from pipeline.overrides import pipeline_config
from pipeline.plan import PlanError, plan_run

SCHEMA = PROJECT_ROOT / "schema" / "taxi" / "schema.pbtxt"
SAMPLE = PROJECT_ROOT / "data" / "taxi" / "span-1"


@pytest.fixture
def select_spans_calls(monkeypatch) -> list[str]:
    """Every call of `select_spans`, wherever a module imported it by name."""
    original = pipeline.spans.select_spans
    calls: list[str] = []

    def counted(config):
        calls.append(config.data_root)
        return original(config)

    for module in list(sys.modules.values()):
        if getattr(module, "select_spans", None) is original:
            monkeypatch.setattr(module, "select_spans", counted)
    return calls


def _data(tmp_path: Path, spans: int = 1) -> Path:
    """A taxi data folder of `spans` spans (copies of the sample span)."""
    for n in range(1, spans + 1):
        shutil.copytree(SAMPLE, tmp_path / "data" / f"span-{n}")
    return tmp_path / "data"


def test_tfxp_run_selects_the_spans_once(tmp_path, monkeypatch, capsys, select_spans_calls):
    """`tfxp run` plans once; the local run, a window's ingest runs and the definition
    take the plan as it is."""
    import tfxp.local.runner as runner
    import tfxp.local.window as window
    from tfxp.cli import main

    data = _data(tmp_path, spans=2)
    built = []

    def run_local(plan, to_nodes=(), **_):  # the real one runs TFX; this builds its pipeline
        built.append((plan.config.span, [s.span for s in plan.spans], create_pipeline(plan)))
        if not to_nodes:  # the run itself; a window's ingest runs go on
            raise runner.PipelineRunError("stopped by the test after building the pipeline")

    monkeypatch.setattr(runner, "run_local", run_local)
    monkeypatch.setattr(window, "run_local", run_local)
    argv = ["run", "--run-dir", str(tmp_path / "r"), "--data-root", str(data)]
    assert main(argv) == 1 and "stopped by the test" in capsys.readouterr().err
    assert [b[:2] for b in built] == [(None, [2])]
    assert select_spans_calls == [str(data)]
    # A window: its older span is ingested on the same plan, the folder listed once.
    built.clear()
    select_spans_calls.clear()
    assert main([*argv, "--window", "2"]) == 1
    assert [b[:2] for b in built] == [(1, [1]), (None, [1, 2])]
    assert select_spans_calls == [str(data)]


def test_airflow_dag_selects_the_spans_once(tmp_path, monkeypatch, select_spans_calls):
    """The DAG's build_dag plans through the pre-run check and hands the plan over."""
    source = (PROJECT_ROOT / "airflow" / "taxi_dag.py").read_text()
    # Airflow itself is not imported: its runner is replaced, and the module-level
    # DAG is not built (the test calls build_dag itself).
    source = source.replace("from tfx.orchestration.airflow.airflow_dag_runner import (", "if 0: (")
    source = source.replace("DAG = build_dag(config_from_env())", "")
    namespace: dict = {"__name__": "taxi_dag_under_test"}
    exec(compile(source, "taxi_dag.py", "exec"), namespace)  # noqa: S102 - the DAG's own code
    handed = []

    class Runner:
        def __init__(self, _config) -> None:
            pass

        def run(self, pipeline):
            handed.append(pipeline)
            return "the dag"

    namespace["AirflowDagRunner"] = Runner
    namespace["AirflowPipelineConfig"] = lambda **_: None
    namespace["add_span_sensor"] = lambda dag, config, poke: None
    env = {"TFXP_DATA_ROOT": str(_data(tmp_path)), "TFXP_RUN_DIR": str(tmp_path / "r")}
    assert namespace["build_dag"](namespace["config_from_env"](env), env) == "the dag"
    assert len(handed) == 1 and handed[0].pipeline_info.pipeline_name == "taxi"
    assert select_spans_calls == [env["TFXP_DATA_ROOT"]]


def test_kubeflow_compile_selects_the_spans_once(select_spans_calls):
    from kubeflow.compiler import build_pipeline
    from kubeflow.config import KubeflowConfig

    config = KubeflowConfig(
        image="registry.example.com/ml/tfx-pipeline:t", pipeline_root="gs://bucket/root"
    )
    build_pipeline(config)
    assert len(select_spans_calls) == 1


def test_the_definition_reads_nothing_the_plan_read(tmp_path):
    """Built after its data, schema and settings are gone: the plan carried them."""
    work = tmp_path / "work"
    data = _data(work)
    schema = work / "schema.pbtxt"
    shutil.copy(SCHEMA, schema)
    config = pipeline_config(
        "taxi", data_root=str(data), run_dir=str(tmp_path / "r"), schema_file=str(schema)
    )
    plan = plan_run(config)
    shutil.rmtree(work)
    pipeline = create_pipeline(plan)
    importer = next(c for c in pipeline.components if c.id == SCHEMA_IMPORTER)
    assert importer.exec_properties["content_sha256"] == plan.schema_sha256
    assert not (tmp_path / "r").exists()  # nor made a folder (the run's check does)
    assert [s.span for s in plan.spans] == [1] and plan.input_bytes > 0


def test_a_bad_schema_is_the_plans_error(tmp_path):
    broken = tmp_path / "schema.pbtxt"
    broken.write_text("feature { this is not a schema")
    with pytest.raises(PlanError, match=str(broken)):
        plan_run(pipeline_config("taxi", schema_file=str(broken)))


def test_a_versioned_folder_plans_the_version_pattern(tmp_path):
    """The layout comes from the spans selected: the folder is listed once."""
    for version in (1, 2):
        shutil.copytree(SAMPLE, tmp_path / "data" / "span-1" / f"version-{version}")
    config = pipeline_config("taxi", data_root=str(tmp_path / "data"))
    plan = plan_run(config)
    assert plan.input_pattern == config.version_pattern
    assert [(s.span, s.version) for s in plan.spans] == [(1, 2)]
    assert plan_run(config.replace(span=1, version=1)).spans[0].version == 1
