"""components/base/component.py: a component from its Spec's arguments, an executor's `run`."""

from __future__ import annotations

import json

import pytest
from tfx import types
from tfx.dsl.components.base import executor_spec
from tfx.types import component_spec, standard_artifacts

from components.base import component
from components.batch_inference.component import BatchInference
from components.evaluation.slicing.evaluator import Evaluator as SlicedEvaluator
from components.evaluation.slicing.evaluator import SlicedEvaluatorSpec
from components.evaluation.slicing.rules import SliceRules
from components.release.serving_check.component import ServingCheck


class _Spec(component_spec.ComponentSpec):
    PARAMETERS = {
        "names": component_spec.ExecutionParameter(type=str),
        "size": component_spec.ExecutionParameter(type=int),
        "note": component_spec.ExecutionParameter(type=str, optional=True),
    }
    INPUTS = {
        "examples": component_spec.ChannelParameter(type=standard_artifacts.Examples),
        "schema": component_spec.ChannelParameter(type=standard_artifacts.Schema, optional=True),
    }
    OUTPUTS = {
        "statistics": component_spec.ChannelParameter(type=standard_artifacts.ExampleStatistics)
    }


class _Seen(component.Executor):
    seen: list[component.Execution] = []

    def run(self, execution: component.Execution) -> None:
        self.seen.append(execution)


class _Example(component.Component):
    SPEC_CLASS = _Spec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(_Seen)
    DEFAULTS = {"size": 7}
    ENCODE = {"names": lambda names: json.dumps(sorted(names))}


def _channel(artifact_type=standard_artifacts.Examples) -> types.Channel:
    return types.Channel(type=artifact_type)


def test_arguments_by_name_defaults_encoding_and_a_fresh_output_channel():
    examples = _channel()
    node = _Example(examples=examples, names=["b", "a"])
    assert node.exec_properties == {"names": '["a", "b"]', "size": 7}
    assert node.inputs["examples"] is examples
    assert "schema" not in node.inputs
    out = node.outputs["statistics"]
    assert out.type is standard_artifacts.ExampleStatistics
    other = _Example(examples=examples, names=[], size=3, note="n")
    assert other.exec_properties == {"names": "[]", "size": 3, "note": "n"}
    assert other.outputs["statistics"] is not out  # each node its own output channel


def test_an_unknown_argument_names_the_component_and_what_it_takes():
    with pytest.raises(TypeError, match=r"_Example: unknown argument\(s\) \['nmaes'\]") as e:
        _Example(examples=_channel(), nmaes=["a"])
    assert "'examples', 'names', 'note', 'schema', 'size'" in str(e.value)
    # An output is made by the component, never passed.
    with pytest.raises(TypeError, match="statistics"):
        _Example(examples=_channel(), names=[], statistics=_channel())


def test_a_missing_required_argument_is_tfxs_error():
    with pytest.raises(ValueError, match="Missing argument 'names'"):
        _Example(examples=_channel())


def test_do_hands_run_the_execution_with_single_artifact_getters():
    _Seen.seen.clear()
    examples, stats = standard_artifacts.Examples(), standard_artifacts.ExampleStatistics()
    _Seen().Do({"examples": [examples]}, {"statistics": [stats]}, {"size": 2})
    (execution,) = _Seen.seen
    assert execution.input("examples") is examples
    assert execution.output("statistics") is stats
    assert execution.inputs_of("schema") == []
    assert execution.properties == {"size": 2}
    assert execution.args == ({"examples": [examples]}, {"statistics": [stats]}, {"size": 2})
    two = component.Execution({"examples": [examples, examples]}, {}, {})
    with pytest.raises(ValueError):
        two.input("examples")
    with pytest.raises(ValueError):
        two.input("schema")  # absent: not exactly one either


def test_an_executor_without_run_says_so():
    class NoRun(component.Executor):
        pass

    with pytest.raises(NotImplementedError, match="NoRun must define run"):
        NoRun().Do({}, {}, {})


def test_the_sliced_evaluator_builds_its_own_spec_over_tfxs_evaluator():
    rules = SliceRules(min_examples=50, max_drop=0.1)
    node = SlicedEvaluator(
        examples=_channel(),
        model=_channel(standard_artifacts.Model),
        baseline_model=None,
        eval_config=None,
        slice_rules=rules,
    )
    assert isinstance(node.spec, SlicedEvaluatorSpec)
    assert node.exec_properties["slice_rules"] == rules.to_json()
    assert set(node.outputs) == {"evaluation", "blessing"}
    assert "baseline_model" not in node.inputs


def test_project_components_encode_their_parameters():
    inference = BatchInference(
        model=_channel(standard_artifacts.Model),
        model_blessing=_channel(standard_artifacts.ModelBlessing),
        data_root="/d",
        span=3,
        files=["b.csv", "a.csv"],
        content_sha256="x",
        columns={"b": "INT", "a": "FLOAT"},
        label_key="a",
    )
    props = inference.exec_properties
    assert json.loads(props["files"]) == ["a.csv", "b.csv"]
    assert props["columns"] == '{"a": "FLOAT", "b": "INT"}'
    assert (props["key_columns"], props["nan_free"], props["tabular"]) == ("[]", "[]", "")
    assert (props["encoding"], props["batch_size"]) == ("utf-8", 1024)
    with pytest.raises(TypeError, match="ServingCheck: unknown argument"):
        ServingCheck(
            model=_channel(standard_artifacts.Model),
            examples=_channel(),
            signature="serving_default",
            label_key="y",
            row=10,
        )
