"""Four of Beam's per-call costs, cached: DoFn introspection, options parsing, the
submodule scan of its pickler and DoFn methods' argument names.

1. DoFn introspection (a quarter of a small run's time).

Beam asks a DoFn for its state and timer specs (`userstate.get_dofn_specs`) each
time it validates, translates or executes it: while the pipeline is built, when
it is translated to the runner API, and again for every bundle a worker runs.
Each call takes `inspect.signature` of every method the DoFn has (~30). TFDV,
tf.Transform and TFMA build pipelines of about a thousand DoFns, so on a few
thousand rows these calls were about a quarter of a whole taxi run.
`benchmarks/beam_speedups.py` measures all four caches: 3,000 rows, 46.0 s
without, 30.7 s with (0.67; StatisticsGen 7.7 -> 3.7 s, Transform 17.9 -> 9.4 s,
Evaluator 12.4 -> 7.6 s; 2026-12-02 04:35). With three caches, two hours
earlier on the same machine: 41.6 -> 25.6 s (0.62). The machine's speed varies
by the hour more than the fourth cache's share (below), so that comparison says
nothing about it; the DoFn cache alone had given 32.8 s of 41.6.

The specs are default values of the methods' parameters, which belong to the
class, so one answer per class is exact. An instance that carries bound methods
of its own (which `dir()` would also list) is never cached. Beam is imported
only by `install()`, so commands that name the plugin stay quick
to start; SDK workers get the cache from the plugin `runtime.beam_speedups_plugin`
(`--beam_plugins`), where it saves the per-bundle calls.

2. Options parsing. `PipelineOptions.view_as(SomeOptions)`, which Beam calls
for every transform it applies (~2,800 times in a small taxi run), builds an
argparse parser of that class's options (a hundred `add_argument` calls) and
parses the pipeline's flags again. The parsed values depend only on the options
class, the flags and (for `CrossLanguageOptions`' default) the environment
variable `BEAM_SERVICE_OVERRIDES`, so they are parsed once per such key and
each new options object gets a deep copy (flags such as `--experiments` parse
to lists a caller may append to). Flags taken from `sys.argv` (`flags=None`)
are never cached. Profiled, the parsing was ~10 % of a small run.

3. Submodule lookup when pickling. For every function it pickles (each DoFn's
methods, every lambda: ~2,200 in a small run), Beam's cloudpickle scans all of
`sys.modules` (~8,000 names once TensorFlow is imported) for submodules of each
package the function references. Here the names are indexed once (by the
name component that follows each package) and the index is rebuilt whenever
sys.modules' size or newest entry changes (an import appends), or a name it
holds is gone; the answer, in `sys.modules` order, is the scan's. (Comparing
the whole set of names per call cost more than the scan: 1.4 ms.) Not caught:
modules removed from sys.modules and as many others imported, the newest
unchanged; nothing in a pipeline run does that.

4. Argument names of DoFn methods. Beam asks for the argument names and
defaults of a DoFn's `process`, `setup`, ... (`core.get_function_args_defaults`,
an `inspect.signature` each) whenever it builds, translates or runs the DoFn:
~15,600 calls in a small taxi run, 1.3 s of its 63 s under cProfile. A
signature belongs to the function, so the answer is kept per function, and
for bound methods per `__func__` (the same for every instance; apart from the
function's own answer, which includes `self`), in fresh lists for each caller.
Callables other than plain functions and their bound methods are never cached.
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import types
import weakref
from typing import Any

# The Beam plugin module (imported by every SDK worker before any work).
PLUGIN = "runtime.beam_speedups_plugin"

_specs: weakref.WeakKeyDictionary[type, tuple[frozenset, frozenset]] = weakref.WeakKeyDictionary()
_original: Any = None
# (options class, flags, BEAM_SERVICE_OVERRIDES) -> the parsed values (a dict).
_parsed: dict[tuple, dict[str, Any]] = {}
_original_init: Any = None
# sys.modules' state (_modules_state) when the submodule index was built, and the index.
_module_index: tuple[tuple[int, Any], dict[tuple[str, str], list[str]]] = ((-1, None), {})
# function -> (argument names, defaults): [0] asked as the function itself, [1] as a
# bound method's __func__ (without the first argument)
_arguments: tuple[weakref.WeakKeyDictionary[Any, tuple[tuple, tuple]], ...] = (
    weakref.WeakKeyDictionary(),
    weakref.WeakKeyDictionary(),
)
_original_arguments: Any = None


def _own_methods(dofn: Any) -> bool:
    attributes = getattr(dofn, "__dict__", None)
    if attributes is None:
        return True  # __slots__ or a proxy: nothing to prove the class answer holds
    return any(isinstance(v, types.MethodType) for v in attributes.values())


def cached_dofn_specs(dofn: Any) -> tuple[set, set]:
    """`userstate.get_dofn_specs`, computed once per DoFn class."""
    if _own_methods(dofn):
        return _original(dofn)
    cls = type(dofn)
    found = _specs.get(cls)
    if found is None:
        state, timers = _original(dofn)  # raises for an invalid DoFn, as before
        found = _specs[cls] = (frozenset(state), frozenset(timers))
    # Fresh sets, as Beam's own function returns: callers may add to them.
    return set(found[0]), set(found[1])


def _options_key(options: Any, flags: Any) -> tuple | None:
    if flags is None or isinstance(flags, str):
        return None  # sys.argv (may change), or the error Beam raises for a str
    try:
        return (type(options), tuple(flags), os.environ.get("BEAM_SERVICE_OVERRIDES"))
    except TypeError:  # an unhashable flag: let Beam deal with it
        return None


def cached_options_init(self: Any, flags: Any = None, **kwargs: Any) -> None:
    """`PipelineOptions.__init__`, with the argparse result reused for the same key."""
    key = _options_key(self, flags)
    parsed = _parsed.get(key) if key is not None else None
    if parsed is None:
        _original_init(self, flags, **kwargs)
        if key is not None:
            _parsed[key] = copy.deepcopy(vars(self._visible_options))
        return
    import argparse

    # What Beam's __init__ does after parsing (apache_beam 2.x, options/pipeline_options.py).
    logging.basicConfig()
    self._flags = flags
    self._visible_options = argparse.Namespace(**copy.deepcopy(parsed))
    self._all_options = kwargs
    for option_name in self._visible_option_list():
        if option_name not in self._all_options:
            self._all_options[option_name] = getattr(self._visible_options, option_name)


def _modules_state() -> tuple[int, Any]:
    """(how many modules, the newest one's name): O(1). Imports append to sys.modules;
    removing one and importing another in its place changes the newest name."""
    modules = sys.modules
    return len(modules), next(reversed(modules), None)


def _submodule_index(force: bool = False) -> dict[tuple[str, str], list[str]]:
    """(package + ".", next name component) -> module names under it; rebuilt when
    sys.modules' size or newest entry is not what it was built from (or on `force`)."""
    global _module_index
    state, index = _module_index
    if force or state != _modules_state():
        index = {}
        for name in list(sys.modules):
            if not isinstance(name, str):
                continue
            parts = name.split(".")
            for k in range(1, len(parts)):
                index.setdefault((".".join(parts[:k]) + ".", parts[k]), []).append(name)
        _module_index = _modules_state(), index
    return index


def indexed_submodules(code: Any, top_level_dependencies: Any) -> list:
    """cloudpickle's `_find_imported_submodules`, with the sys.modules scan indexed: a
    submodule qualifies only if every component after the package is one of the code's
    names, so the first one must be, and the index is looked up by it."""
    co_names = set(code.co_names)
    prefixes = [
        x.__name__ + "."
        for x in top_level_dependencies
        if isinstance(x, types.ModuleType) and hasattr(x, "__package__") and x.__package__
    ]

    def candidates(index: dict[tuple[str, str], list[str]]) -> list[list[str]]:
        return [[n for first in co_names for n in index.get((p, first), ())] for p in prefixes]

    found = candidates(_submodule_index())
    if not all(name in sys.modules for names in found for name in names):
        found = candidates(_submodule_index(force=True))  # a module left since the build
    order: dict[str, int] = {}
    result: list[types.ModuleType] = []
    for prefix, names in zip(prefixes, found, strict=True):
        hits = [n for n in names if not set(n[len(prefix) :].split(".")) - co_names]
        if len(hits) > 1:  # the scan's order: sys.modules order
            order = order or {n: i for i, n in enumerate(sys.modules)}
            hits.sort(key=order.__getitem__)
        result.extend(sys.modules[name] for name in hits)
    return result


def cached_args_defaults(f: Any) -> tuple[list[str], list[Any]]:
    """`core.get_function_args_defaults`, computed once per function."""
    if isinstance(f, types.MethodType) and isinstance(f.__func__, types.FunctionType):
        cache, key = _arguments[1], f.__func__
    elif isinstance(f, types.FunctionType):
        cache, key = _arguments[0], f
    else:
        return _original_arguments(f)
    found = cache.get(key)
    if found is None:
        args, defaults = _original_arguments(f)
        found = cache[key] = (tuple(args), tuple(defaults))
    return list(found[0]), list(found[1])


def install() -> None:
    """Makes Beam use the four caches (idempotent). Beam's own modules call
    `userstate.get_dofn_specs`, `core.get_function_args_defaults` and cloudpickle's
    `_find_imported_submodules` through their modules, so replacing them there
    suffices; every options class inherits `PipelineOptions.__init__`."""
    global _original, _original_init, _original_arguments
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.transforms import core, userstate

    from compat import beam as beam_internals

    if beam_internals.find_imported_submodules() is not indexed_submodules:
        # Beam's own function, for what calls through the replacement (functools' convention).
        indexed_submodules.__wrapped__ = beam_internals.find_imported_submodules()  # type: ignore[attr-defined]
        beam_internals.set_find_imported_submodules(indexed_submodules)
    if userstate.get_dofn_specs is not cached_dofn_specs:
        _original = userstate.get_dofn_specs
        userstate.get_dofn_specs = cached_dofn_specs
    if PipelineOptions.__init__ is not cached_options_init:
        _original_init = PipelineOptions.__init__
        PipelineOptions.__init__ = cached_options_init  # type: ignore[method-assign]  # the speed-up
    if core.get_function_args_defaults is not cached_args_defaults:
        _original_arguments = core.get_function_args_defaults
        core.get_function_args_defaults = cached_args_defaults


def uninstall() -> None:
    """Puts Beam's own four functions back (benchmarks measure with and without)."""
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.transforms import core, userstate

    from compat import beam as beam_internals

    if _original is not None:
        userstate.get_dofn_specs = _original
    if _original_init is not None:
        PipelineOptions.__init__ = _original_init  # type: ignore[method-assign]  # put back
    if _original_arguments is not None:
        core.get_function_args_defaults = _original_arguments
    original_scan = getattr(indexed_submodules, "__wrapped__", None)
    if original_scan is not None:
        beam_internals.set_find_imported_submodules(original_scan)
