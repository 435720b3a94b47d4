"""Imported by the fork server in tests/unit/runtime/test_forkserver.py: state a preloaded module leaves behind."""

import tempfile

tempfile.gettempdir()  # caches tempfile.tempdir from the server's TMPDIR, as TensorFlow's import does

# A slow import on request: blocks until the file HOLD names exists, then says it finished.
_hold = __import__("os").environ.get("FORKSERVER_PROBE_HOLD")
if _hold:
    import os
    import time

    for _ in range(600):
        if os.path.exists(_hold):
            break
        time.sleep(0.1)
    with open(_hold + ".imported", "w"):
        pass
