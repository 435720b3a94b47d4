"""Imported by the fork server in tests/test_forkserver.py: state a preloaded module leaves behind."""

import tempfile

tempfile.gettempdir()  # caches tempfile.tempdir from the server's TMPDIR, as TensorFlow's import does
