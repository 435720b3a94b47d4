"""The per-class cache of Beam's DoFn state/timer specs gives Beam's own answers."""

from __future__ import annotations

import apache_beam as beam
import pytest
from apache_beam.coders import VarIntCoder
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import userstate
from apache_beam.transforms.timeutil import TimeDomain

from runtime import beam_speedups

COUNT = userstate.ReadModifyWriteStateSpec("count", VarIntCoder())
FLUSH = userstate.TimerSpec("flush", TimeDomain.WATERMARK)
# Beam reads the specs from these parameter defaults (module-level: ruff's B008).
COUNT_PARAM = beam.DoFn.StateParam(COUNT)
FLUSH_PARAM = beam.DoFn.TimerParam(FLUSH)


class Plain(beam.DoFn):
    def process(self, element):
        yield element


class Counting(beam.DoFn):
    """A stateful DoFn: a running count per key."""

    def process(self, element, count=COUNT_PARAM):
        n = (count.read() or 0) + 1
        count.write(n)
        yield element[0], n


class WithTimer(beam.DoFn):
    def process(self, element, timer=FLUSH_PARAM):
        yield element

    @userstate.on_timer(FLUSH)
    def flush(self):
        yield None


def test_the_cache_is_installed_and_beam_calls_it() -> None:
    beam_speedups.install()
    beam_speedups.install()  # idempotent
    assert userstate.get_dofn_specs is beam_speedups.cached_dofn_specs
    assert userstate.is_stateful_dofn(Counting()) and not userstate.is_stateful_dofn(Plain())


@pytest.mark.parametrize("dofn_class", [Plain, Counting, WithTimer])
def test_cached_answer_equals_beams_own(dofn_class) -> None:
    beam_speedups.install()
    original = beam_speedups._original
    expected = original(dofn_class())
    first = beam_speedups.cached_dofn_specs(dofn_class())
    again = beam_speedups.cached_dofn_specs(dofn_class())
    assert first == again == expected
    assert dofn_class in beam_speedups._specs
    # Callers get sets of their own: changing one does not change the cache.
    again[0].add("x")
    assert beam_speedups.cached_dofn_specs(dofn_class()) == expected


def test_an_instance_with_its_own_bound_methods_is_not_cached() -> None:
    beam_speedups.install()
    dofn = Plain()
    dofn.process = Counting().process  # dir() sees it; its specs differ from Plain's
    state, _ = beam_speedups.cached_dofn_specs(dofn)
    assert state == {COUNT}
    assert beam_speedups.cached_dofn_specs(Plain()) == (set(), set())


def test_an_invalid_dofn_still_raises() -> None:
    class Duplicate(beam.DoFn):
        def process(self, e, a=COUNT_PARAM, b=COUNT_PARAM):
            yield e

    beam_speedups.install()
    with pytest.raises(ValueError, match="duplicate"):
        beam_speedups.cached_dofn_specs(Duplicate())


def test_a_stateful_pipeline_runs_right_with_the_cache() -> None:
    beam_speedups.install()
    with beam.Pipeline() as p:
        counts = (
            p
            | beam.Create([("a", 1), ("b", 1), ("a", 1)])
            | beam.ParDo(Counting())
            | beam.CombinePerKey(max)
        )
        assert_that(counts, equal_to([("a", 2), ("b", 1)]))


def test_the_plugin_module_installs_the_cache_when_a_worker_imports_it() -> None:
    import importlib

    userstate.get_dofn_specs = beam_speedups._original or userstate.get_dofn_specs
    importlib.reload(importlib.import_module(beam_speedups.PLUGIN))
    assert userstate.get_dofn_specs is beam_speedups.cached_dofn_specs


# --- the options-parse cache --------------------------------------------------

FLAG_SETS = [
    [],
    ["--direct_running_mode=in_memory", "--direct_num_workers=1"],
    [
        "--runner=PortableRunner",
        "--job_endpoint=localhost:1",
        "--environment_type=EXTERNAL",
        "--experiments=a",
        "--experiments=b",
        "--beam_plugins=x.y",
        "--not_a_beam_flag=3",
    ],
    ["--setup_file=/x/setup.py", "--temp_location=/tmp/t", "--beam_services={}"],
]


def _options_classes() -> list[type]:
    from apache_beam.options.pipeline_options import PipelineOptions

    found, todo = [PipelineOptions], [PipelineOptions]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.append(sub)
                todo.append(sub)
    return found


def _state(options) -> tuple[dict, dict]:
    return vars(options._visible_options), dict(options._all_options)


def _uncached(cls, flags, **kwargs):
    options = cls.__new__(cls)
    (beam_speedups._original_init or cls.__init__)(options, flags, **kwargs)
    return options


@pytest.mark.parametrize("flags", FLAG_SETS, ids=range(len(FLAG_SETS)))
def test_cached_options_equal_beams_own_for_every_options_class(flags) -> None:
    beam_speedups.install()
    classes = _options_classes()
    assert len(classes) > 10
    for cls in classes:
        expected = _state(_uncached(cls, list(flags), runner="X"))
        for _ in range(2):  # the first fills the cache, the second reads it
            assert _state(cls(list(flags), runner="X")) == expected, cls.__name__


def test_cached_options_do_not_share_lists_or_views() -> None:
    from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions

    beam_speedups.install()
    PipelineOptions(["--experiments=a"]).view_as(DebugOptions)  # fills the cache
    first = PipelineOptions(["--experiments=a"]).view_as(DebugOptions)  # from the cache
    first.add_experiment("added")
    second = PipelineOptions(["--experiments=a"]).view_as(DebugOptions)
    assert second.experiments == ["a"]
    # A view still shares its options object's values (Beam's contract).
    options = PipelineOptions(["--experiments=a"])
    options.view_as(DebugOptions).add_experiment("b")
    assert options.view_as(DebugOptions).experiments == ["a", "b"]


def test_the_options_cache_follows_the_environment_and_skips_sys_argv(monkeypatch) -> None:
    from apache_beam.options.pipeline_options import CrossLanguageOptions

    beam_speedups.install()
    monkeypatch.delenv("BEAM_SERVICE_OVERRIDES", raising=False)
    assert CrossLanguageOptions([]).beam_services == {}
    monkeypatch.setenv("BEAM_SERVICE_OVERRIDES", '{"a": "b"}')
    assert CrossLanguageOptions([]).beam_services == {"a": "b"}
    monkeypatch.setattr("sys.argv", ["prog", "--job_name=one"])
    assert CrossLanguageOptions().view_as(_job_options()).job_name == "one"
    monkeypatch.setattr("sys.argv", ["prog", "--job_name=two"])
    assert CrossLanguageOptions().view_as(_job_options()).job_name == "two"


def _job_options() -> type:
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    return GoogleCloudOptions


def test_a_bad_flag_value_still_fails_as_beam_fails() -> None:
    from apache_beam.options.pipeline_options import DirectOptions

    beam_speedups.install()
    for _ in range(2):  # nothing cached from the failure
        with pytest.raises(SystemExit):
            DirectOptions(["--direct_num_workers=many"])


# --- the pickler's submodule lookup ------------------------------------------------


def _uses_submodules():
    import os.path  # what the function below reaches through `os`

    import apache_beam.transforms.userstate

    return os.path.join, apache_beam.transforms.userstate, apache_beam.io.textio


def test_indexed_submodule_lookup_equals_cloudpickles_scan() -> None:
    import inspect
    import itertools

    import tensorflow as tf
    from apache_beam.internal.cloudpickle import cloudpickle

    beam_speedups.install()
    original = cloudpickle._find_imported_submodules.__wrapped__
    dependencies = [os_module(), beam, tf, tf.io, inspect, itertools, 3, None, "text"]
    functions = [_uses_submodules, beam_speedups.install, beam.Map, tf.io.gfile.exists]
    functions += [f for f in vars(beam.transforms.core).values() if inspect.isfunction(f)]
    assert len(functions) > 20
    compared = 0
    for function in functions:
        code = function.__code__
        expected = original(code, dependencies)
        assert beam_speedups.indexed_submodules(code, dependencies) == expected, function
        compared += bool(expected)
    assert compared >= 2  # some functions do reach submodules
    # A module imported after the index was built is found (the index is rebuilt).
    import xml.dom.minidom  # imported here on purpose

    def reaches_minidom():
        return xml.dom.minidom

    import xml

    got = beam_speedups.indexed_submodules(reaches_minidom.__code__, [xml])
    assert got == original(reaches_minidom.__code__, [xml]) and got
    # A module that left sys.modules since the index was built is not answered.
    import sys

    saved = sys.modules.pop("xml.dom.minidom")
    try:
        left = beam_speedups.indexed_submodules(reaches_minidom.__code__, [xml])
        assert left == original(reaches_minidom.__code__, [xml])
        assert saved not in left
    finally:
        sys.modules["xml.dom.minidom"] = saved


def os_module():
    import os

    return os


def test_uninstall_puts_beams_own_functions_back() -> None:
    from apache_beam.internal.cloudpickle import cloudpickle
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.transforms import core

    beam_speedups.install()
    beam_speedups.uninstall()
    try:
        assert userstate.get_dofn_specs is beam_speedups._original
        assert PipelineOptions.__init__ is beam_speedups._original_init
        assert cloudpickle._find_imported_submodules is not beam_speedups.indexed_submodules
        assert core.get_function_args_defaults is beam_speedups._original_arguments
    finally:
        beam_speedups.install()
    assert cloudpickle._find_imported_submodules is beam_speedups.indexed_submodules


# 4. Argument names of DoFn methods.


class WithDefaults(beam.DoFn):
    def process(self, element, prefix="x", *args, timestamp=beam.DoFn.TimestampParam):
        yield prefix + element

    def setup(self):
        pass


def _functions_to_ask_about() -> list:
    def plain(a, b=2, *rest, c, **kw):
        return a

    one, two = WithDefaults(), WithDefaults()
    return [
        plain,
        WithDefaults.process,  # the function itself: `self` is an argument
        one.process,  # bound: it is not (same function, a different answer)
        two.process,  # another instance: the same answer, from the cache
        WithDefaults.process,
        one.setup,
        Counting().process,  # state and timer parameters as defaults
        WithTimer().process,
        lambda x, y=1: x,
        str.upper,  # a method descriptor: never cached
        len,  # a builtin: never cached
        beam.Map(lambda x: x).fn.process,
    ]


def test_cached_argument_names_equal_beams_own() -> None:
    from apache_beam.transforms import core

    beam_speedups.install()
    own = beam_speedups._original_arguments
    for f in _functions_to_ask_about():
        for _ in range(2):  # a miss, then a hit
            assert core.get_function_args_defaults(f) == own(f), f


def test_cached_argument_lists_are_not_shared_and_other_callables_skip_the_cache() -> None:
    from apache_beam.transforms import core

    beam_speedups.install()
    fn = WithDefaults().process
    args, defaults = core.get_function_args_defaults(fn)
    args.append("mutated")
    defaults.clear()
    assert core.get_function_args_defaults(fn) == (["element", "prefix"], ["x"])
    assert WithDefaults.process in beam_speedups._arguments[1]  # keyed by the function
    before = [len(cache) for cache in beam_speedups._arguments]
    core.get_function_args_defaults(str.upper)
    core.get_function_args_defaults(len)
    assert [len(cache) for cache in beam_speedups._arguments] == before


def test_a_pipeline_of_dofns_with_defaults_runs_right_with_the_cache() -> None:
    beam_speedups.install()
    with beam.Pipeline() as p:
        words = p | beam.Create(["a", "b"])
        once = words | "default prefix" >> beam.ParDo(WithDefaults())
        twice = once | "given prefix" >> beam.ParDo(WithDefaults(), "y")
        assert_that(twice, equal_to(["yxa", "yxb"]))
