"""pipeline/beam.py: each Beam mode's arguments, and clear errors for what a mode lacks."""

from __future__ import annotations

import dataclasses

import pytest
from tfx.dsl.components.base.base_beam_executor import BaseBeamExecutor

from pipeline.beam import BeamConfigError, BeamOptions, beam_args
from pipeline.config import LOCAL_BEAM_ARGS, SETUP_FILE
from pipeline.overrides import pipeline_config
from pipeline.plan import plan_run
from runtime.beam_workers import WORKER_PRELOAD


class _NoWorkExecutor(BaseBeamExecutor):
    """A TFX Beam component's executor; only its Beam pipeline is used."""

    def Do(self, input_dict, output_dict, exec_properties):  # TFX's name
        raise NotImplementedError


def test_in_process_names_its_runner_and_a_dependency_flag() -> None:
    assert beam_args(BeamOptions()) == LOCAL_BEAM_ARGS
    assert ("--runner=FnApiRunner", f"--setup_file={SETUP_FILE}") == LOCAL_BEAM_ARGS
    assert beam_args(BeamOptions(extra_args=("--direct_num_workers=1",))) == (
        *LOCAL_BEAM_ARGS,
        "--direct_num_workers=1",
    )
    # An image that has the project (Kubeflow's "direct" preset) stands for the package.
    assert beam_args(BeamOptions(sdk_container_image="img:1")) == (
        "--runner=FnApiRunner",
        "--sdk_container_image=img:1",
    )


def _beam_executor(beam_pipeline_args) -> _NoWorkExecutor:
    context = BaseBeamExecutor.Context(beam_pipeline_args=list(beam_pipeline_args), tmp_dir="/tmp")
    return _NoWorkExecutor(context)


def test_tfx_runs_the_local_arguments_in_process_without_prism_or_an_sdist(monkeypatch) -> None:
    """What a Beam component's executor makes of the in-process arguments: the
    FnApiRunner itself. Beam's default DirectRunner would first try to download
    and start its Prism runner (every pipeline); without a dependency flag, TFX
    would build an sdist of tfx for every component."""
    import apache_beam as beam
    from apache_beam.runners.portability import prism_runner
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    from apache_beam.testing.util import assert_that, equal_to
    from tfx.utils import dependency_utils

    attempts: list[str] = []

    def refuse(what: str):
        def record(*args, **kwargs):
            attempts.append(what)
            raise RuntimeError(what)

        return record

    monkeypatch.setattr(dependency_utils, "build_ephemeral_package", refuse("sdist"))
    # The DirectRunner would catch this and fall back: hence the record.
    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", refuse("prism"))
    with _beam_executor(LOCAL_BEAM_ARGS)._make_beam_pipeline() as p:
        assert isinstance(p.runner, FnApiRunner)
        assert_that(p | beam.Create([1, 2, 3]) | beam.combiners.Count.Globally(), equal_to([3]))
    multi = beam_args(BeamOptions(mode="multi-process", num_workers=1))
    assert isinstance(_beam_executor(multi)._make_beam_pipeline().runner, FnApiRunner)
    assert attempts == []


def test_multi_process_runs_one_worker_per_core_unless_told() -> None:
    assert beam_args(BeamOptions(mode="multi-process")) == (
        "--runner=FnApiRunner",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=0",
        f"--setup_file={SETUP_FILE}",
    )
    assert "--direct_num_workers=3" in beam_args(BeamOptions(mode="multi-process", num_workers=3))


def test_portable_submits_to_the_job_service_with_external_workers_and_the_package() -> None:
    args = beam_args(
        BeamOptions(
            mode="portable",
            job_endpoint="localhost:8099",
            environment_config="localhost:50000",
            plugins=("tfxp.storage.beam_plugin",),
            extra_args=("--sdk_worker_parallelism=2",),
        )
    )
    assert args == (
        "--runner=PortableRunner",
        "--job_endpoint=localhost:8099",
        "--environment_type=EXTERNAL",
        "--environment_config=localhost:50000",
        f"--setup_file={SETUP_FILE}",
        "--beam_plugins=tfxp.storage.beam_plugin",
        "--sdk_worker_parallelism=2",
    )
    assert SETUP_FILE.endswith("/setup.py")


def test_portable_with_docker_workers_uses_the_image_and_ships_no_package() -> None:
    args = beam_args(
        BeamOptions(
            mode="portable",
            job_endpoint="h:8099",
            environment_type="docker",
            sdk_container_image="reg/tfx-pipeline:1",
        )
    )
    assert "--environment_type=DOCKER" in args
    assert "--environment_config=reg/tfx-pipeline:1" in args
    assert "--sdk_container_image=reg/tfx-pipeline:1" in args
    assert not any(a.startswith("--setup_file") for a in args)


@pytest.mark.parametrize(
    ("mode", "runner"), [("flink", "FlinkRunner"), ("spark-job-server", "SparkRunner")]
)
def test_flink_and_spark_submit_to_their_job_server(mode: str, runner: str) -> None:
    args = beam_args(
        BeamOptions(mode=mode, job_endpoint="js:8099", environment_config="pool:50000")
    )
    assert args[:4] == (
        f"--runner={runner}",
        "--job_endpoint=js:8099",
        "--environment_type=EXTERNAL",
        "--environment_config=pool:50000",
    )


@pytest.mark.parametrize(
    ("mode", "flag"), [("flink", "--flink_master"), ("spark-job-server", "--spark_master_url")]
)
def test_flink_and_spark_without_a_job_server_need_the_cluster(mode: str, flag: str) -> None:
    with pytest.raises(BeamConfigError, match=f"add --beam-arg={flag}=HOST:PORT"):
        beam_args(BeamOptions(mode=mode, environment_config="pool:50000"))
    args = beam_args(
        BeamOptions(mode=mode, environment_config="p:1", extra_args=(f"{flag}=m:8081",))
    )
    assert args[-1] == f"{flag}=m:8081" and not any("job_endpoint" in a for a in args)


def test_spark_runs_the_projects_runner_on_the_named_master() -> None:
    args = beam_args(BeamOptions(mode="spark", spark_master="spark://127.0.0.1:7077"))
    assert args == (
        "--runner=beam_spark.SparkRunner",
        "--spark_master=spark://127.0.0.1:7077",
        # Warm Python workers, and one application for the run's components.
        f"--spark_preload={','.join(WORKER_PRELOAD)}",
        "--spark_keep_context",
        f"--setup_file={SETUP_FILE}",
    )
    sized = beam_args(
        BeamOptions(
            mode="spark",
            spark_master="local[2]",
            spark_executor_memory="1g",
            plugins=("p",),
            extra_args=("--spark_parallelism=4",),
        )
    )
    assert sized[1:] == (
        "--spark_master=local[2]",
        f"--spark_preload={','.join(WORKER_PRELOAD)}",
        "--spark_keep_context",
        "--spark_executor_memory=1g",
        f"--setup_file={SETUP_FILE}",
        "--beam_plugins=p",
        "--spark_parallelism=4",
    )
    # No job server, no SDK worker environment: the executors are the workers.
    assert not any(a.startswith(("--job_endpoint", "--environment")) for a in args)


def test_beam_resolves_the_spark_runner_by_its_dotted_name() -> None:
    """The name `--runner` carries is one Beam's own lookup turns into the runner class."""
    from apache_beam.runners.runner import create_runner

    import beam_spark
    from pipeline.beam import SPARK_RUNNER

    assert type(create_runner(SPARK_RUNNER)) is beam_spark.SparkRunner


def test_dataflow_stages_under_the_temp_location() -> None:
    args = beam_args(
        BeamOptions(
            mode="dataflow",
            temp_location="gs://b/tmp/",
            extra_args=("--project=p", "--region=europe-west1"),
        )
    )
    assert args == (
        "--runner=DataflowRunner",
        "--temp_location=gs://b/tmp",
        "--staging_location=gs://b/tmp/staging",
        f"--setup_file={SETUP_FILE}",
        "--project=p",
        "--region=europe-west1",
    )
    image = beam_args(
        BeamOptions(
            mode="dataflow",
            temp_location="gs://b/t",
            sdk_container_image="i:1",
            extra_args=("--project=p", "--region=r"),
        )
    )
    assert "--sdk_container_image=i:1" in image and not any("setup_file" in a for a in image)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (BeamOptions(mode="dask"), "unknown Beam mode 'dask'; choose one of in-process"),
        (BeamOptions(mode="portable"), "needs a job service: --job-endpoint HOST:PORT"),
        (
            BeamOptions(mode="portable", job_endpoint="h:1"),
            "EXTERNAL needs the SDK worker pool's address: --environment-config HOST:PORT",
        ),
        (
            BeamOptions(mode="portable", job_endpoint="h:1", environment_type="DOCKER"),
            "DOCKER needs the SDK container image",
        ),
        (
            BeamOptions(mode="portable", job_endpoint="h:1", environment_type="VM"),
            "unknown environment type 'VM'",
        ),
        (
            BeamOptions(mode="dataflow", temp_location="gs://b/t"),
            r"needs --project, --region: add --beam-arg=--project=\.\.\. --beam-arg=--region",
        ),
        (
            BeamOptions(
                mode="dataflow",
                temp_location="s3://b/t",
                extra_args=("--project=p", "--region=r"),
            ),
            r"Cloud Storage temp location: --temp-location gs://BUCKET/tmp \(got s3://b/t\)",
        ),
        (
            BeamOptions(mode="dataflow", extra_args=("--project=p", "--region=r")),
            r"\(got none\)",
        ),
        (BeamOptions(mode="multi-process", num_workers=-1), "0 \\(one per core\\) or more"),
        (BeamOptions(mode="spark"), "needs a Spark master: --spark-master spark://HOST:PORT"),
        (
            BeamOptions(mode="spark", spark_master="127.0.0.1:7077"),
            "'127.0.0.1:7077' is not a master URL: spark://HOST:PORT",
        ),
    ],
)
def test_what_a_mode_lacks_is_named(options: BeamOptions, message: str) -> None:
    with pytest.raises(BeamConfigError, match=message):
        beam_args(options)


def test_overrides_turn_beam_options_into_the_configs_arguments() -> None:
    options = BeamOptions(mode="portable", job_endpoint="h:1", environment_config="h:2")
    config = pipeline_config("taxi", beam=options)
    assert config.beam_args == beam_args(options)
    assert pipeline_config("taxi", beam=None).beam_args == LOCAL_BEAM_ARGS
    with pytest.raises(ValueError, match="not both"):
        pipeline_config("taxi", beam=options, beam_args=("--x=1",))


def _beam_of(argv: list[str]) -> tuple:
    """(the Beam options `tfxp run` hands the plan, the config they are for)."""
    from tfxp.cli import build_parser
    from tfxp.cli.common import beam_from_args, config_from_args

    args = build_parser().parse_args(argv)
    config = config_from_args(args)
    return beam_from_args(args, config), config


def test_cli_flags_reach_the_config(tmp_path) -> None:
    options, _ = _beam_of(
        ["run", "--run-dir", str(tmp_path), "--beam", "portable", "--job-endpoint", "h:1"]
        + ["--environment-config", "h:2", "--beam-arg=--sdk_worker_parallelism=2"]
    )
    args = beam_args(options)
    assert args[:4] == (
        "--runner=PortableRunner",
        "--job_endpoint=h:1",
        "--environment_type=EXTERNAL",
        "--environment_config=h:2",
    )
    assert args[-1] == "--sdk_worker_parallelism=2"
    # A local pipeline root: the workers need no s3:// plugin, only the DoFn cache.
    plugins = [a for a in args if "beam_plugins" in a]
    assert plugins == ["--beam_plugins=runtime.beam_speedups_plugin"]
    bucket, _ = _beam_of(
        ["run", "--run-dir", "s3://b/r", "--beam", "portable", "--job-endpoint", "h:1"]
        + ["--environment-config", "h:2"]
    )
    assert "--beam_plugins=tfxp.storage.beam_plugin" in beam_args(bucket)
    # The plan applies them: the config it runs with carries the mode's arguments.
    planned = plan_run(pipeline_config("taxi", run_dir=str(tmp_path)), options)
    assert planned.config.beam_args == args and planned.beam.mode == "portable"
    options, config = _beam_of(["run", "--run-dir", str(tmp_path)])
    assert options.mode == "auto"
    assert plan_run(config, options).config.beam_args == LOCAL_BEAM_ARGS


def test_run_refuses_a_mode_without_what_it_needs(tmp_path, capsys) -> None:
    from tfxp.cli import main

    code = main(["run", "--run-dir", str(tmp_path / "r"), "--beam", "portable"])
    assert code == 1
    assert "--job-endpoint HOST:PORT" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_auto_picks_multi_process_for_large_input_on_several_cores() -> None:
    from pipeline.beam import AUTO_MULTI_PROCESS_BYTES, auto_mode

    assert auto_mode(AUTO_MULTI_PROCESS_BYTES - 1, cores=2) == "in-process"
    assert auto_mode(AUTO_MULTI_PROCESS_BYTES, cores=2) == "multi-process"
    assert auto_mode(AUTO_MULTI_PROCESS_BYTES * 10, cores=1) == "in-process"
    assert auto_mode(None, cores=8) == "in-process"  # size unknown (object storage)


def _span(tmp_path, span: int, rows: int) -> None:
    folder = tmp_path / "data" / f"span-{span}"
    folder.mkdir(parents=True)
    (folder / "data.csv").write_text("a,b\n" + "1,2\n" * rows)


def test_run_defaults_to_auto_which_sizes_the_spans_it_will_ingest(tmp_path, monkeypatch) -> None:
    import pipeline.beam
    from pipeline.spans import SpanError

    monkeypatch.setattr(pipeline.beam, "AUTO_MULTI_PROCESS_BYTES", 1000)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    _span(tmp_path, 1, rows=100)  # 404 bytes
    _span(tmp_path, 2, rows=300)  # 1,204 bytes
    base = ["run", "--run-dir", str(tmp_path / "r"), "--data-root", str(tmp_path / "data")]

    def planned(*flags: str):
        return plan_run(*reversed(_beam_of([*base, *flags])))

    small = planned("--span", "1")
    assert small.beam.mode == "in-process" and small.beam.note is None
    assert small.config.beam_args == LOCAL_BEAM_ARGS
    assert small.input_bytes == 404

    large = planned()  # the latest span, 2
    assert "--direct_running_mode=multi_processing" in large.config.beam_args
    assert large.config.num_shards == 4  # two per worker, so every worker has files to read
    assert "span 2: 0 MB of input" in large.beam.note
    assert "--beam in-process" in large.beam.note

    # A window counts every span it ingests.
    monkeypatch.setattr(pipeline.beam, "AUTO_MULTI_PROCESS_BYTES", 1500)
    assert planned().config.beam_args == LOCAL_BEAM_ARGS
    window = planned("--window", "2")
    assert "--direct_running_mode=multi_processing" in window.config.beam_args
    assert "span 1, span 2: 0 MB" in window.beam.note
    assert [s.span for s in window.spans] == [1, 2]

    told = planned("--beam", "in-process")
    assert told.config.beam_args == LOCAL_BEAM_ARGS
    assert told.config.num_shards == 0  # sized for the data, as before
    shards = planned("--beam", "multi-process", "--num-shards", "3")
    assert shards.config.num_shards == 3  # the user's count stands
    # A data folder that cannot serve the run: the plan says so, with the folder.
    options, config = _beam_of(["run", "--data-root", str(tmp_path / "none")])
    with pytest.raises(SpanError, match="none"):
        plan_run(config, options)


def _runs_in(args) -> tuple[str, int]:
    """(running mode, workers) of the Beam pipeline TFX's executor builds from `args`."""
    from apache_beam.options.pipeline_options import DirectOptions

    direct = _beam_executor(args)._make_beam_pipeline().options.view_as(DirectOptions)
    return direct.direct_running_mode, direct.direct_num_workers


@pytest.mark.parametrize("csv_reader", ["arrow", "tfx"])
def test_multi_process_keeps_the_arrow_ingest_in_process(tmp_path, csv_reader: str) -> None:
    """The Arrow ingest threads its own work; Beam's worker processes only add
    their start-up (1M rows: 5.7 s in-process, 13.6 s multi-process). TFX's
    per-row reader and every other Beam component keep the workers."""
    from pipeline.definition import create_pipeline
    from pipeline.node_ids import EXAMPLE_GEN, STATISTICS_GEN, TRANSFORM

    config = dataclasses.replace(
        pipeline_config(run_dir=str(tmp_path), beam=BeamOptions(mode="multi-process")),
        csv_reader=csv_reader,
    )
    components = {c.id: c for c in create_pipeline(plan_run(config)).components}
    modes = {
        n: _runs_in(components[n].executor_spec.beam_pipeline_args)
        for n in components
        if n in (EXAMPLE_GEN, STATISTICS_GEN, TRANSFORM)
    }
    assert modes[STATISTICS_GEN] == modes[TRANSFORM] == ("multi_processing", 0)
    assert modes[EXAMPLE_GEN] == (
        ("in_memory", 1) if csv_reader == "arrow" else ("multi_processing", 0)
    )


def test_other_modes_leave_the_ingest_where_the_data_is(tmp_path) -> None:
    """Portable/Flink/Spark/Dataflow workers are where the data is: no override."""
    from pipeline.beam import IN_PROCESS_OVERRIDE, in_process_override
    from pipeline.definition import create_pipeline
    from pipeline.node_ids import EXAMPLE_GEN

    assert in_process_override(LOCAL_BEAM_ARGS) == ()
    portable = BeamOptions(
        mode="portable", job_endpoint="localhost:8099", environment_config="localhost:50000"
    )
    config = pipeline_config(run_dir=str(tmp_path), beam=portable)
    example_gen = next(
        c for c in create_pipeline(plan_run(config)).components if c.id == EXAMPLE_GEN
    )
    assert example_gen.executor_spec.beam_pipeline_args == list(config.beam_args)
    assert not set(IN_PROCESS_OVERRIDE) & set(example_gen.executor_spec.beam_pipeline_args)
