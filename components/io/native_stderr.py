"""Sends what native (C++) code writes straight to file descriptor 2 into the Python log.

TFDV's C++ validation logs a warning line per feature it cannot find in a
statistics view (`statistics_view.cc:... GetByPath() can't find: tips`, ~18
lines per gate on the taxi data: the serving statistics have no label, by
design). Those lines bypass Python's logging, so neither `TF_CPP_MIN_LOG_LEVEL`
nor the runner's log handlers reach them. Around such calls, fd 2 points at a
temporary file; afterwards its lines go to the Python log at INFO, which the
runner writes to the run's log file and keeps off the terminal.

Anything else written to fd 2 during the block (Python's own stderr included)
is logged the same way, never lost.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
from collections.abc import Iterator

from absl import logging

_lock = threading.Lock()  # one redirection at a time: fd 2 is process-wide


@contextlib.contextmanager
def native_stderr_to_log(what: str) -> Iterator[None]:
    """Within the block, fd 2 goes to the log (one INFO line per line written, tagged `what`)."""
    with _lock, tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode(errors="replace").splitlines():
                if line.strip():
                    logging.info("%s (native stderr): %s", what, line)
