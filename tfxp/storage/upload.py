"""Putting a local drop into a bucket as the next span (`tfxp data upload`, `tfxp init`).

Every object goes through `storage.s3_client()` (server-side encryption from
`storage:` on each write) or TensorFlow's file system for gs://.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

from components.io.encryption import from_env
from components.io.object_storage import s3_endpoint
from pipeline.spans import PUBLISHED_MARKER
from tfxp.storage.storage import (
    REMOTE_SCHEMES,
    Location,
    StorageError,
    apply_encryption,
    check_location,
    prepare_s3_environment,
    s3_client,
    s3_error,
    scheme,
    split_uri,
)


@dataclass(frozen=True)
class Uploaded:
    span: int
    uris: tuple[str, ...]
    nbytes: int
    created_bucket: bool


def _s3_span_numbers(client, bucket: str, prefix: str) -> list[int]:
    import re

    base = f"{prefix.rstrip('/')}/" if prefix else ""
    numbers = []
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=base, Delimiter="/"):
        for common in page.get("CommonPrefixes", []):
            m = re.fullmatch(r"span-(\d+)/", common["Prefix"][len(base) :])
            if m:
                numbers.append(int(m.group(1)))
    return sorted(numbers)


def _ensure_s3_bucket(client, loc: Location, create: bool) -> bool:
    """True when the bucket had to be created."""
    from botocore import exceptions as bex

    bucket, _ = split_uri(loc.uri)
    try:
        client.head_bucket(Bucket=bucket)
        return False
    except bex.ClientError as e:
        missing = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404
        if not (create and missing):
            raise s3_error(loc, e) from None
    region = os.environ.get("AWS_REGION", "us-east-1")
    kwargs = {}
    if region != "us-east-1" and not s3_endpoint():  # AWS wants the region spelled out
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        client.create_bucket(Bucket=bucket, **kwargs)
    except bex.ClientError as e:
        raise StorageError(f"could not create bucket '{bucket}': {e}") from None
    return True


def upload_span(
    files: Iterable[str | os.PathLike],
    dest_root: str,
    *,
    span: int | None = None,
    create_bucket: bool = True,
) -> Uploaded:
    """Copies one local drop (CSV files) to `dest_root/span-<N>/` in a bucket.

    N is `span`, or the next number after the spans already there (1 in an empty
    bucket). Each file is one object PUT, which S3 makes visible whole or not at
    all, so a run never reads half a file. s3:// creates a missing bucket when
    `create_bucket`; gs:// buckets must exist.
    """
    files = [os.fspath(f) for f in files]
    kind = scheme(dest_root)
    loc = Location(dest_root, "upload destination", write=True)
    apply_encryption(from_env(), [loc])  # the setting the command exported, or refused
    if kind not in REMOTE_SCHEMES:
        raise StorageError(f"{dest_root}: upload takes an s3:// or gs:// URI")
    bucket, prefix = split_uri(dest_root)
    if not bucket:
        raise StorageError(f"{dest_root}: no bucket in the URI ({kind}://BUCKET/path)")
    nbytes = sum(os.path.getsize(f) for f in files)
    if kind == "s3":
        prepare_s3_environment()
        client = s3_client()
        try:
            created = _ensure_s3_bucket(client, loc, create_bucket)
            number = span or max(_s3_span_numbers(client, bucket, prefix), default=0) + 1
            uris = []
            for f in files:
                key = "/".join(
                    p for p in (prefix.strip("/"), f"span-{number}", os.path.basename(f)) if p
                )
                client.upload_file(f, bucket, key)
                uris.append(f"s3://{bucket}/{key}")
            # Last: the span is whole (watchers wait for it; tfxp/monitor/watch.py).
            marker = "/".join(
                p for p in (prefix.strip("/"), f"span-{number}", PUBLISHED_MARKER) if p
            )
            client.put_object(Bucket=bucket, Key=marker, Body=b"")
        except StorageError:
            raise
        except Exception as e:  # noqa: BLE001 - boto3's many error types become one StorageError naming the location
            raise s3_error(loc, e) from None
        return Uploaded(number, tuple(uris), nbytes, created)
    check_location(loc)
    import tensorflow as tf

    root = dest_root.rstrip("/")
    existing = [
        int(name.strip("/").split("-", 1)[1])
        for name in (tf.io.gfile.listdir(root) if tf.io.gfile.exists(root) else [])
        if name.strip("/").startswith("span-") and name.strip("/")[5:].isdigit()
    ]
    number = span or max(existing, default=0) + 1
    uris = []
    for f in files:
        uri = f"{root}/span-{number}/{os.path.basename(f)}"
        tf.io.gfile.copy(f, uri, overwrite=False)
        uris.append(uri)
    with tf.io.gfile.GFile(f"{root}/span-{number}/{PUBLISHED_MARKER}", "w") as marker:
        marker.write("")
    return Uploaded(number, tuple(uris), nbytes, False)
