"""`tfxp run ... -v`: our own command line must not reach TFX's absl flag parsing."""

import sys

import pytest
from absl.flags import IllegalFlagValueError
from tfx.dsl.components.base import base_beam_executor

from tfxp.local.process import program_name_only_argv

BEAM_ARGS = ["--runner=FnApiRunner", "--direct_num_workers=0"]


class _Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties):  # TFX API
        raise AssertionError("not run")


def _beam_executor():
    # What every Beam component's executor does when it is constructed.
    return _Executor(_Executor.Context(beam_pipeline_args=list(BEAM_ARGS)))


@pytest.mark.timeout(60)
def test_trailing_verbose_flag_swallows_the_first_beam_argument(monkeypatch):
    # Why the runner cuts argv: TFX parses sys.argv + Beam's arguments with absl.
    monkeypatch.setattr(sys, "argv", ["tfxp", "run", "--no-cache", "-v"])
    with pytest.raises(IllegalFlagValueError, match="--runner=FnApiRunner"):
        _beam_executor()


@pytest.mark.timeout(60)
def test_program_name_only_while_components_run(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["tfxp", "run", "--no-cache", "-v"])
    with program_name_only_argv():
        assert sys.argv == ["tfxp"]
        executor = _beam_executor()  # would raise with the whole command line
        assert "--runner=FnApiRunner" in executor._beam_pipeline_args
    assert sys.argv == ["tfxp", "run", "--no-cache", "-v"]
