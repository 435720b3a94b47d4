"""The driver's JVM launch (beam_spark/context.py): a gateway that exits before giving
its port is launched once more; a second such exit, or any other error, is raised."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pyspark.errors import PySparkRuntimeError

from beam_spark import context


def _exited() -> PySparkRuntimeError:
    return PySparkRuntimeError(error_class="JAVA_GATEWAY_EXITED", message_parameters={})


def _launcher(outcomes: list[Any]):
    """A SparkContext stand-in that raises or returns `outcomes` in turn, counting calls."""
    calls: list[Any] = []

    def launch(conf):
        calls.append(conf)
        outcome = outcomes[len(calls) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return launch, calls


def test_a_gateway_that_exits_once_is_launched_again(monkeypatch, caplog):
    launch, calls = _launcher([_exited(), "the context"])
    monkeypatch.setattr("pyspark.SparkContext", launch)
    with caplog.at_level(logging.WARNING, logger="beam_spark.context"):
        assert context._started_context("conf") == "the context"
    assert calls == ["conf", "conf"]
    assert "exited before giving its port (launch 1 of 2)" in caplog.text


def test_a_second_exit_is_raised_as_pyspark_raises_it(monkeypatch):
    launch, calls = _launcher([_exited(), _exited(), "never"])
    monkeypatch.setattr("pyspark.SparkContext", launch)
    with pytest.raises(PySparkRuntimeError) as raised:
        context._started_context("conf")
    assert raised.value.getErrorClass() == "JAVA_GATEWAY_EXITED"
    assert len(calls) == context.GATEWAY_LAUNCHES == 2


def test_other_errors_are_not_retried(monkeypatch):
    launch, calls = _launcher([ValueError("bad conf"), "never"])
    monkeypatch.setattr("pyspark.SparkContext", launch)
    with pytest.raises(ValueError, match="bad conf"):
        context._started_context("conf")
    assert len(calls) == 1
