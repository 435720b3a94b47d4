"""A Beam plugin (--beam_plugins=runtime.beam_speedups_plugin): an SDK worker
imports it before any work, which installs the DoFn-introspection cache there."""

from runtime.beam_speedups import install

install()
