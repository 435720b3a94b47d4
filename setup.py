"""Beam's --setup_file builds the project's sdist with this (pipeline/beam.py).

Everything is declared in pyproject.toml; this file only gives Beam's stager
the `python setup.py sdist` it falls back to when the `build` package is absent.
"""

from setuptools import setup

setup()
