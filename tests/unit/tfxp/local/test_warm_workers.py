"""tfxp/local/warm_workers.py: multi-process Beam's SDK workers forked from a zygote.

The pipelines here are real FnApiRunner pipelines with two SDK worker
subprocesses; the zygote preloads only Beam's worker module, so each test takes
seconds. Each element reports the pid of its worker's parent: the zygote's for
a forked worker.
"""

from __future__ import annotations

import os

import pytest

from pipeline.beam import BeamOptions, beam_args
from tfxp.local import warm_workers as ww

pytestmark = pytest.mark.timeout(180)

MULTI = beam_args(BeamOptions(mode="multi-process", num_workers=2))
IN_PROCESS = beam_args(BeamOptions(mode="in-process"))


def _registered():
    from apache_beam.portability import python_urns
    from apache_beam.runners.portability.fn_api_runner import worker_handlers

    return worker_handlers.WorkerHandler._registered_environments[python_urns.SUBPROCESS_SDK]


def _workers_parents(args, tmp_path) -> dict[int, int]:
    """{worker pid: its parent's pid} of the SDK workers that ran a small pipeline."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    out_dir = tmp_path / "parents"
    out_dir.mkdir()

    def record(_: int, d: str = str(out_dir)) -> None:
        with open(os.path.join(d, str(os.getpid())), "w") as f:
            f.write(str(os.getppid()))

    with beam.Pipeline(options=PipelineOptions(list(args))) as p:
        _ = p | beam.Create(range(40)) | beam.Reshuffle() | beam.Map(record)
    return {int(n): int((out_dir / n).read_text()) for n in os.listdir(out_dir)}


@pytest.fixture
def light_zygote(monkeypatch):
    """The zygote imports only Beam's worker module (the real one imports TensorFlow)."""
    monkeypatch.setattr(ww, "PRELOAD", (ww.BEAM_WORKER_MODULE,))


def test_other_modes_start_no_zygote_and_change_nothing(tmp_path) -> None:
    before = _registered()
    with ww.warm_workers(IN_PROCESS, str(tmp_path / "run.log")) as zygote:
        assert zygote is None
        assert _registered() is before
    with ww.warm_workers(MULTI, str(tmp_path / "run.log"), enabled=False) as zygote:
        assert zygote is None
        assert _registered() is before


def test_the_stand_in_command_is_the_fn_runners_module_swapped() -> None:
    import sys

    assert (
        ww.fn_runner_command() == f"{sys.executable} -m apache_beam.runners.worker.sdk_worker_main"
    )
    assert ww.stand_in_command("/tmp/x y/socket:12").endswith(
        "-m tfxp.local.warm_workers '/tmp/x y/socket:12'"
    )


def test_multi_process_workers_fork_from_the_zygote(tmp_path, light_zygote) -> None:
    before = _registered()
    with ww.warm_workers(MULTI, str(tmp_path / "run.log")) as zygote:
        assert zygote is not None and _registered() is not before
        zygote_pid = int(zygote.address().rpartition(":")[2])
        parents = _workers_parents(MULTI, tmp_path)
    assert parents and set(parents.values()) == {zygote_pid}, (parents, zygote_pid)
    assert _registered() is before  # Beam's own handler is back
    with pytest.raises(ProcessLookupError):  # and the zygote stopped (close() reaps it)
        os.kill(zygote_pid, 0)


def test_without_the_block_workers_start_fresh(tmp_path) -> None:
    parents = _workers_parents(MULTI, tmp_path)
    # Each worker is its own shell's child (Beam's Popen(shell=True)): no common parent.
    assert len(parents) == 2 and len(set(parents.values())) == 2, parents


def test_a_zygote_that_cannot_start_leaves_fresh_workers_and_says_why(
    tmp_path, monkeypatch, capfd, caplog
) -> None:
    monkeypatch.setattr(ww, "PRELOAD", ("no_such_module_for_the_zygote",))
    with ww.warm_workers(MULTI, str(tmp_path / "run.log")):
        parents = _workers_parents(MULTI, tmp_path)
    assert parents  # the pipeline ran
    # Said by the stand-in, or by the driver if the zygote had died before the first worker.
    said = capfd.readouterr().err + caplog.text
    assert f"{ww.FRESH_WARNING}the fork server" in said, said[-2000:]
    assert "no_such_module_for_the_zygote" in (tmp_path / "run.log").read_text()


def test_a_zygote_not_started_now_starts_with_the_first_worker(tmp_path, light_zygote) -> None:
    with ww.warm_workers(MULTI, str(tmp_path / "run.log"), start_now=False) as zygote:
        assert zygote is not None and zygote._proc is None  # nothing started yet
        parents = _workers_parents(MULTI, tmp_path)
        zygote_pid = zygote._proc.pid
    assert set(parents.values()) == {zygote_pid}, (parents, zygote_pid)


def test_no_worker_no_zygote(tmp_path) -> None:
    with ww.warm_workers(MULTI, str(tmp_path / "run.log"), start_now=False) as zygote:
        pass
    assert zygote is not None and zygote._proc is None
