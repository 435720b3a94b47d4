"""Branches over S3, lakeFS's layout: `s3://REPO/REF/path`, REF a branch or a commit id.

lakeFS's S3 gateway serves a repository as a bucket and a branch (or a commit)
as the first folder of every key. A data root in that layout needs nothing
special to be read (it is S3); what this module adds is *which version* a run
read: the branch, and the commit when it is known. It is known when REF is a
commit id (lakeFS's are 64 hex digits: a run pinned to it), or when the
endpoint reports one with the object (a `x-lakefs-commit` header, or
`lakefs-commit`/`commit` in the object's user metadata). Plain S3 and SeaweedFS
report none; the branch is then recorded without a commit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tfxp.storage.storage import s3_client, split_uri

COMMIT_ID = re.compile(r"^[0-9a-f]{64}$")
COMMIT_HEADERS = ("x-lakefs-commit",)
COMMIT_METADATA = ("lakefs-commit", "commit")


@dataclass(frozen=True)
class BucketRef:
    repo: str  # the bucket
    ref: str  # the first folder of the key: a branch or a commit id
    branch: str  # "" when the ref is a commit id
    commit: str  # "" when neither the ref nor the endpoint says which commit
    commit_from: str  # "ref", "endpoint", or ""


def parse(data_root: str) -> tuple[str, str] | None:
    """(repo, ref) of an `s3://REPO/REF/...` data root; None for other roots."""
    if not data_root.startswith("s3://"):
        return None
    bucket, key = split_uri(data_root.rstrip("/"))
    ref = key.split("/", 1)[0]
    return (bucket, ref) if ref else None


def commit_reported(head: dict) -> str:
    """The commit an S3 HeadObject response carries, or ""."""
    headers = (head.get("ResponseMetadata") or {}).get("HTTPHeaders") or {}
    for name in COMMIT_HEADERS:
        if headers.get(name):
            return str(headers[name])
    metadata = {k.lower(): v for k, v in (head.get("Metadata") or {}).items()}
    for name in COMMIT_METADATA:
        if metadata.get(name):
            return str(metadata[name])
    return ""


def bucket_ref(data_root: str, probe: str | None = None, client=None) -> BucketRef | None:
    """The data root's repo and ref, with the commit the ref names or `probe` (an
    object's s3:// URI, e.g. a file of the span a run read) reports."""
    parsed = parse(data_root)
    if parsed is None:
        return None
    repo, ref = parsed
    if COMMIT_ID.match(ref):
        return BucketRef(repo, ref, "", ref, "ref")
    commit = ""
    if probe is not None:
        bucket, key = split_uri(probe)
        commit = commit_reported((client or s3_client()).head_object(Bucket=bucket, Key=key))
    return BucketRef(repo, ref, ref, commit, "endpoint" if commit else "")
