"""Byte-range reads of CSV files on local disk, in s3:// or in gs://, for the Arrow ingest.

The Arrow ingest (components/example_gen/csv_ingest.py) cuts files into byte
ranges and reads each range in blocks of a few MB. `open_ranges` gives it a
random-access file (seek, read(n), size) over local and remote files alike, so
both are read at the same offsets. On S3 every `read(n)` is one ranged GET of
n bytes; on GCS a `seek` starts a streaming download from that offset (an
open-ended ranged GET) which the following reads consume. Either way a task
holds a few blocks in memory, never a whole object.

Remote files go through pyarrow's own S3 and GCS filesystems (C++ clients with
ranged reads), not TensorFlow's S3 plugin: that plugin's reads go through a
loopback relay (tfxp/storage/s3_shim.py) and its multi-part reads returned
wrong bytes. The S3 client reads the same standard environment as every other
S3 client of the project (docs/object-storage.md): credentials from
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN / AWS_PROFILE and
~/.aws; the endpoint of an S3-compatible store from `s3_endpoint` (the one
mapping of AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL / S3_ENDPOINT, also used by
tfxp/storage); AWS_REGION and AWS_MAX_ATTEMPTS. GCS uses Google's
application-default credentials, or an emulator at STORAGE_EMULATOR_HOST (the
variable Google's own clients read) without credentials.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

# Schemes `open_ranges` reads besides local paths.
RANGE_SCHEMES = ("s3", "gs")


class RangeReadError(OSError):
    """A file cannot be opened for byte-range reads; the message names it and why."""


def s3_endpoint(env: Mapping[str, str] = os.environ) -> str | None:
    """The S3-compatible endpoint URL the user configured, if any (None: AWS itself)."""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        if env.get(name):
            return env[name]
    legacy = env.get("S3_ENDPOINT")
    if legacy:
        if "://" in legacy:
            return legacy
        https = env.get("S3_USE_HTTPS", "1") not in ("0", "false", "False")
        return ("https://" if https else "http://") + legacy
    return None


def scheme_of(path: str) -> str:
    """'s3', 'gs', another URI scheme, or '' for a local path."""
    return path.split("://", 1)[0].lower() if "://" in path else ""


def _endpoint_parts(url: str, variable: str) -> tuple[str, str]:
    """(scheme, host[:port]) of an endpoint URL, as pyarrow's clients take them."""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    if parts.path.strip("/") or not parts.netloc or parts.scheme not in ("http", "https"):
        raise RangeReadError(
            f"endpoint {url!r} (from {variable}) is not http(s)://HOST[:PORT]; "
            "Arrow's object-storage clients take only a scheme, host and port"
        )
    return parts.scheme, parts.netloc


def s3_options(env: Mapping[str, str] = os.environ) -> dict:
    """Keyword arguments of pyarrow's S3FileSystem for this environment (no credentials:
    the AWS SDK reads them from the environment and ~/.aws itself)."""
    options: dict = {}
    endpoint = s3_endpoint(env)
    if endpoint:
        options["scheme"], options["endpoint_override"] = _endpoint_parts(
            endpoint, "AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL / S3_ENDPOINT"
        )
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        options["region"] = region
    attempts = env.get("AWS_MAX_ATTEMPTS", "")
    if attempts.isdigit() and int(attempts) > 0:
        options["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=int(attempts))
    return options


def gcs_options(env: Mapping[str, str] = os.environ) -> dict:
    """Keyword arguments of pyarrow's GcsFileSystem for this environment."""
    emulator = env.get("STORAGE_EMULATOR_HOST")
    if not emulator:
        return {}  # application-default credentials, Google's endpoint
    scheme, host = _endpoint_parts(
        emulator if "://" in emulator else f"http://{emulator}", "STORAGE_EMULATOR_HOST"
    )
    return {"anonymous": True, "scheme": scheme, "endpoint_override": host}


_CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CONFIG_FILE",
    "GOOGLE_APPLICATION_CREDENTIALS",
)
_filesystems: dict[tuple, pafs.FileSystem] = {}
_lock = threading.Lock()


def _remote_filesystem(kind: str, bucket: str) -> pafs.FileSystem:
    """One filesystem per scheme and environment per process (clients are thread-safe)."""
    options = s3_options() if kind == "s3" else gcs_options()
    if kind == "s3" and "region" not in options and "endpoint_override" not in options:
        # AWS itself with no region configured: ask where the bucket lives.
        options["region"] = pafs.resolve_s3_region(bucket)
    # Credentials are read when a client is made: a changed environment gets a new one.
    credentials = tuple(os.environ.get(name, "") for name in _CREDENTIAL_VARIABLES)
    key = (kind, credentials, *sorted((k, repr(v)) for k, v in options.items()))
    with _lock:
        if key not in _filesystems:
            make = pafs.S3FileSystem if kind == "s3" else pafs.GcsFileSystem
            _filesystems[key] = make(**options)
        return _filesystems[key]


def filesystem_for(path: str) -> tuple[pafs.FileSystem | None, str]:
    """(the pyarrow filesystem of `path`, the path within it); None for a local path."""
    kind = scheme_of(path)
    if not kind:
        return None, path
    if kind not in RANGE_SCHEMES:
        raise RangeReadError(
            f"{path}: byte-range reads take local paths, s3:// or gs://, not {kind}://"
        )
    within = path.split("://", 1)[1]
    bucket = within.split("/", 1)[0]
    if not bucket:
        raise RangeReadError(f"{path}: no bucket in the URI ({kind}://BUCKET/path)")
    try:
        return _remote_filesystem(kind, bucket), within
    except (OSError, pa.ArrowException) as e:
        raise RangeReadError(f"{path}: cannot set up Arrow's {kind}:// client: {e}") from e


def open_ranges(path: str) -> pa.NativeFile:
    """`path` opened for seek + read(n), each read one ranged request; `size()` is its length."""
    filesystem, within = filesystem_for(path)
    try:
        if filesystem is None:
            return pa.OSFile(path, "rb")
        return filesystem.open_input_file(within)
    except (OSError, pa.ArrowException) as e:
        raise RangeReadError(f"{path}: cannot open for reading: {e}") from e
