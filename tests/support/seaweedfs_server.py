"""A private SeaweedFS S3 server for object-storage tests (session fixture `seaweedfs`).

Started and stopped by `scripts/seaweedfs.sh` (the script users run too): data
in pytest's temp dir, S3 on a free loopback port, signed requests only, no
automatic bucket creation. `stop()`/`start()` let a test take the server away
mid-run and bring it back on the same port with the same data.

tests/conftest.py registers the fixture once for every test.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "seaweedfs.sh"
ACCESS_KEY = "tfxp-test"
SECRET_KEY = "tfxp-test-secret"


def ports(directory: Path) -> dict[str, str]:
    """The ports (and keys) the script keeps in DIR/ports."""
    lines = (directory / "ports").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


@dataclass
class SeaweedFS:
    directory: Path
    port: int = 0  # S3's: the script picks a free one at the first start
    encrypt: bool = True  # the script's default: volume data encrypted

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, **overrides: str) -> dict[str, str]:
        """The process environment a client of this server needs (AWS_* only)."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AWS_", "S3_")) and k != "TFXP_STORAGE_TIMEOUT"
        }
        env.update(
            AWS_ENDPOINT_URL=self.endpoint,
            AWS_ACCESS_KEY_ID=ACCESS_KEY,
            AWS_SECRET_ACCESS_KEY=SECRET_KEY,
            AWS_REGION="us-east-1",
            # No ~/.aws of whoever runs the tests.
            AWS_CONFIG_FILE=str(self.directory / "no-aws-config"),
            AWS_SHARED_CREDENTIALS_FILE=str(self.directory / "no-aws-credentials"),
        )
        env.update(overrides)
        return env

    def client(self):
        import boto3

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name="us-east-1",
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        found = []
        paginator = self.client().get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            found.extend(o["Key"] for o in page.get("Contents", []))
        return found

    def start(self) -> None:
        done = subprocess.run(
            [
                str(SCRIPT),
                "start",
                str(self.directory),
                str(self.port or "auto"),
                ACCESS_KEY,
                SECRET_KEY,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "SEAWEEDFS_ENCRYPT": "1" if self.encrypt else "0"},
        )
        if done.returncode != 0:
            pytest.fail(f"could not start SeaweedFS:\n{done.stderr[-3000:]}", pytrace=False)
        self.port = int(ports(self.directory)["S3_PORT"])

    def volume_files(self) -> list[Path]:
        """The volume servers' data files: what a stolen disk of a volume server holds."""
        return sorted((self.directory / "data").rglob("*.dat"))

    def stop(self) -> None:
        subprocess.run([str(SCRIPT), "stop", str(self.directory)], capture_output=True, timeout=60)

    def running(self) -> bool:
        return (
            subprocess.run([str(SCRIPT), "status", str(self.directory)], timeout=30).returncode == 0
        )


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory):
    server = SeaweedFS(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        yield server
    finally:
        server.stop()
