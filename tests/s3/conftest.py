"""Object-storage tests: a real SeaweedFS S3 server (the `seaweedfs` fixture of
tests/support/seaweedfs_server.py, registered in tests/conftest.py)."""

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
for folder in (TESTS, TESTS / "e2e"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
