"""One way to write a component: a Spec, a `Component` that names it, an `Executor` with `run`.

A component of this project is three declarations and no boilerplate:

    class ServingCheckSpec(component_spec.ComponentSpec):
        PARAMETERS = {...}
        INPUTS = {...}
        OUTPUTS = {BLESSING_KEY: component_spec.ChannelParameter(type=InfraBlessing)}

    class Executor(component.Executor):
        def run(self, execution: component.Execution) -> None:
            model = execution.input(MODEL_KEY)
            ...

    class ServingCheck(component.Component):
        SPEC_CLASS = ServingCheckSpec
        EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

`ServingCheck(model=..., examples=..., rows=...)` takes the Spec's inputs and
parameters by name (a name the Spec does not declare is an error that names
the component and what it takes) and makes a fresh channel for every output.
A component whose Python arguments are not yet the Spec's parameters says so
declaratively: `DEFAULTS` fills what the caller left out, `ENCODE` turns a
value into its parameter (settings objects into their JSON). The Spec stays
the one list of what a component reads and writes.

`Executor.Do` is TFX's entry point, written once here: it hands `run` an
`Execution` (inputs, outputs and parameters, with single-artifact getters).
An executor that extends one of TFX's puts `Executor` first among its bases
and calls the TFX executor's `Do` from `run` (`execution.args`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from tfx import types
from tfx.dsl.components.base import base_component, base_executor
from tfx.types import artifact_utils, component_spec

Artifacts = dict[str, list[types.Artifact]]


def spec_arguments(
    component: str,
    spec_class: type[component_spec.ComponentSpec],
    arguments: Mapping[str, Any],
    defaults: Mapping[str, Any],
    encode: Mapping[str, Callable[[Any], Any]],
) -> dict[str, Any]:
    """The Spec's keyword arguments: `arguments` with `defaults` filled in and `encode`
    applied, plus a new channel per output. Raises TypeError naming `component` for
    a name the Spec does not take (TFX's ComponentSpec would ignore it)."""
    takes = [*spec_class.INPUTS, *spec_class.PARAMETERS]
    unknown = sorted(set(arguments) - set(takes))
    if unknown:
        raise TypeError(f"{component}: unknown argument(s) {unknown}; it takes {sorted(takes)}")
    values = {**defaults, **arguments}
    for name, to_parameter in encode.items():
        if name in values:
            values[name] = to_parameter(values[name])
    for name, output in spec_class.OUTPUTS.items():
        values[name] = types.Channel(type=output.type)
    return values


class Component(base_component.BaseComponent):
    """A component built from its Spec's arguments by name (module docstring).

    Also the first base of a component that extends one of TFX's (the sliced
    Evaluator): the Spec is built here, the TFX component's own `__init__`,
    which would build its own Spec class, is not called.
    """

    DEFAULTS: ClassVar[Mapping[str, Any]] = {}
    ENCODE: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    def __init__(self, **arguments: Any) -> None:
        cls = type(self)
        values = spec_arguments(cls.__name__, cls.SPEC_CLASS, arguments, cls.DEFAULTS, cls.ENCODE)
        base_component.BaseComponent.__init__(self, spec=cls.SPEC_CLASS(**values))


@dataclass(frozen=True)
class Execution:
    """One execution's artifacts and parameters, as TFX passes them to `Do`."""

    inputs: Artifacts
    outputs: Artifacts
    properties: dict[str, Any]

    def input(self, key: str) -> types.Artifact:
        """The one artifact of input `key` (ValueError when there is not exactly one)."""
        return artifact_utils.get_single_instance(list(self.inputs.get(key) or []))

    def output(self, key: str) -> types.Artifact:
        """The one artifact of output `key`."""
        return artifact_utils.get_single_instance(list(self.outputs.get(key) or []))

    def inputs_of(self, key: str) -> list[types.Artifact]:
        """Every artifact of input `key`; empty for an optional input left unset."""
        return list(self.inputs.get(key) or [])

    @property
    def args(self) -> tuple[Artifacts, Artifacts, dict[str, Any]]:
        """(input_dict, output_dict, exec_properties): the arguments of a TFX executor's Do."""
        return self.inputs, self.outputs, self.properties


class Executor(base_executor.BaseExecutor):
    """TFX's `Do`, once for every executor of the project: subclasses write `run`."""

    def Do(  # TFX API
        self, input_dict: Artifacts, output_dict: Artifacts, exec_properties: dict[str, Any]
    ) -> None:
        self.run(Execution(input_dict, output_dict, exec_properties))

    def run(self, execution: Execution) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define run(execution)")
