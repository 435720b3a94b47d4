"""Two of Beam's per-call costs, cached: DoFn introspection and options parsing.

1. DoFn introspection (a quarter of a small run's time).

Beam asks a DoFn for its state and timer specs (`userstate.get_dofn_specs`) each
time it validates, translates or executes it: while the pipeline is built, when
it is translated to the runner API, and again for every bundle a worker runs.
Each call takes `inspect.signature` of every method the DoFn has (~30). TFDV,
tf.Transform and TFMA build pipelines of about a thousand DoFns, so on a few
thousand rows these calls were about a quarter of a whole taxi run
(`benchmarks/beam_speedups.py --repeat 1`, 3,000 rows: 42.6 s without the cache,
32.8 s with it; StatisticsGen 7.7 -> 5.5 s, Transform 17.1 -> 10.9 s, Evaluator
10.5 -> 8.9 s).

The specs are default values of the methods' parameters, which belong to the
class, so one answer per class is exact. An instance that carries bound methods
of its own (which `dir()` would also list) is never cached. Beam is imported
only by `install()`, so commands that name the plugin stay quick
to start; SDK workers get the cache from the plugin `tfxp.beam_speedups_plugin`
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
"""

from __future__ import annotations

import copy
import logging
import os
import types
import weakref
from typing import Any

# The Beam plugin module (imported by every SDK worker before any work).
PLUGIN = "tfxp.beam_speedups_plugin"

_specs: weakref.WeakKeyDictionary[type, tuple[frozenset, frozenset]] = weakref.WeakKeyDictionary()
_original: Any = None
# (options class, flags, BEAM_SERVICE_OVERRIDES) -> the parsed values (a dict).
_parsed: dict[tuple, dict[str, Any]] = {}
_original_init: Any = None


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


def install() -> None:
    """Makes Beam use both caches (idempotent). Beam's own modules call
    `userstate.get_dofn_specs` through the module, so replacing it there suffices;
    every options class inherits `PipelineOptions.__init__`."""
    global _original, _original_init
    from apache_beam.options.pipeline_options import PipelineOptions
    from apache_beam.transforms import userstate

    if userstate.get_dofn_specs is not cached_dofn_specs:
        _original = userstate.get_dofn_specs
        userstate.get_dofn_specs = cached_dofn_specs
    if PipelineOptions.__init__ is not cached_options_init:
        _original_init = PipelineOptions.__init__
        PipelineOptions.__init__ = cached_options_init
