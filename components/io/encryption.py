"""Server-side encryption of what the project writes to object storage (`storage:`).

One setting, read from the dataset file's `storage:` block or `tfxp run
--sse/--kms-key-id/--gcs-kms-key/--require-encryption`, travels to every
writer through environment variables (`to_env` / `from_env`), because the
writers live in several processes: the `tfxp` process, the relay for
TensorFlow's S3 client (tfxp/storage/s3_shim.py, a child process), Beam's SDK
workers and forked components all inherit the environment.

How each writer applies it (docs/protecting-data.md has the table):
- boto3 clients (our own helpers, Beam's S3 filesystem): `add_sse_to_client`
  hooks botocore's parameter building, so every PutObject,
  CreateMultipartUpload and CopyObject carries `ServerSideEncryption` (and
  `SSEKMSKeyId`) whoever calls it;
- TensorFlow's s3:// writes (tensorflow-io): its C++ client has no SSE
  setting, so the relay it already goes through adds the same headers
  (`s3_headers`) to each object PUT and multipart-upload start before it
  re-signs the request;
- Google Cloud Storage: neither TensorFlow's nor Beam's GCS client takes a
  per-write key here, so a CMEK key is the bucket's default key: the
  pre-flight checks that the bucket's default key is the configured one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SSE_MODES = ("AES256", "aws:kms")
STORAGE_KEYS = {"sse", "kms_key_id", "gcs_kms_key", "require_encryption"}

ENV_SSE = "TFXP_S3_SSE"
ENV_KMS_KEY_ID = "TFXP_S3_SSE_KMS_KEY_ID"
ENV_GCS_KMS_KEY = "TFXP_GCS_KMS_KEY"
ENV_REQUIRE = "TFXP_REQUIRE_ENCRYPTION"

# S3 operations that create an object's stored bytes; UploadPart inherits the
# setting of its CreateMultipartUpload (S3 rejects SSE-S3/KMS headers on parts).
S3_WRITE_OPERATIONS = ("PutObject", "CreateMultipartUpload", "CopyObject")
SSE_HEADER = "x-amz-server-side-encryption"
KMS_HEADER = "x-amz-server-side-encryption-aws-kms-key-id"


class EncryptionSettingError(ValueError):
    """A `storage:` setting that cannot be used; the message names the key."""


class EncryptionRequiredError(RuntimeError):
    """`require_encryption` is set and a writer cannot honour it: nothing was written."""


@dataclass(frozen=True)
class StorageEncryption:
    """Server-side encryption for s3:// and gs:// writes (empty: the store's default)."""

    sse: str | None = None  # S3: "AES256" (SSE-S3) or "aws:kms" (SSE-KMS)
    kms_key_id: str | None = None  # S3 SSE-KMS: the key's id or ARN; None: the AWS-managed key
    gcs_kms_key: str | None = None  # GCS CMEK: projects/P/locations/L/keyRings/R/cryptoKeys/K
    require: bool = False  # refuse to start rather than let any writer write in the clear

    @property
    def active(self) -> bool:
        return bool(self.sse or self.gcs_kms_key or self.require)

    def s3_params(self) -> dict[str, str]:
        """boto3 parameters of a write operation."""
        params: dict[str, str] = {}
        if self.sse:
            params["ServerSideEncryption"] = self.sse
        if self.sse == "aws:kms" and self.kms_key_id:
            params["SSEKMSKeyId"] = self.kms_key_id
        return params

    def s3_headers(self) -> dict[str, str]:
        """The same as HTTP request headers (for clients without the setting)."""
        headers: dict[str, str] = {}
        if self.sse:
            headers[SSE_HEADER] = self.sse
        if self.sse == "aws:kms" and self.kms_key_id:
            headers[KMS_HEADER] = self.kms_key_id
        return headers

    def to_env(self) -> dict[str, str]:
        return {
            ENV_SSE: self.sse or "",
            ENV_KMS_KEY_ID: self.kms_key_id or "",
            ENV_GCS_KMS_KEY: self.gcs_kms_key or "",
            ENV_REQUIRE: "1" if self.require else "",
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "sse": self.sse,
            "kms_key_id": self.kms_key_id,
            "gcs_kms_key": self.gcs_kms_key,
            "require_encryption": self.require,
        }


def from_env(env: Mapping[str, str] = os.environ) -> StorageEncryption:
    """The setting a parent process exported (`export_env`); checked like the file's."""
    return read_storage(
        {
            "sse": env.get(ENV_SSE) or None,
            "kms_key_id": env.get(ENV_KMS_KEY_ID) or None,
            "gcs_kms_key": env.get(ENV_GCS_KMS_KEY) or None,
            "require_encryption": env.get(ENV_REQUIRE, "") not in ("", "0", "false"),
        },
        "environment (TFXP_S3_SSE, ...)",
    )


def export_env(setting: StorageEncryption, env: os._Environ | dict | None = None) -> None:
    """Makes `setting` the one every writer started from now on reads."""
    env = os.environ if env is None else env
    for name, value in setting.to_env().items():
        if value:
            env[name] = value
        else:
            env.pop(name, None)


def read_storage(raw: Any, where: str) -> StorageEncryption:
    """The dataset file's `storage:` mapping (or flags) as a StorageEncryption."""
    if raw is None:
        return StorageEncryption()
    if not isinstance(raw, dict):
        raise EncryptionSettingError(f"{where}: a mapping of {sorted(STORAGE_KEYS)}, not {raw!r}")
    unknown = set(raw) - STORAGE_KEYS
    if unknown:
        raise EncryptionSettingError(
            f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(STORAGE_KEYS)}"
        )
    sse = raw.get("sse")
    if sse is not None and sse not in SSE_MODES:
        raise EncryptionSettingError(f"{where}.sse: one of {list(SSE_MODES)}, not {sse!r}")
    kms = raw.get("kms_key_id")
    if kms is not None and (not isinstance(kms, str) or not kms.strip()):
        raise EncryptionSettingError(f"{where}.kms_key_id: a KMS key id or ARN, not {kms!r}")
    if kms and sse != "aws:kms":
        raise EncryptionSettingError(f"{where}.kms_key_id needs sse: aws:kms (sse is {sse!r})")
    gcs = raw.get("gcs_kms_key")
    if gcs is not None and (not isinstance(gcs, str) or "/cryptoKeys/" not in gcs):
        raise EncryptionSettingError(
            f"{where}.gcs_kms_key: a Cloud KMS key name "
            f"(projects/P/locations/L/keyRings/R/cryptoKeys/K), not {gcs!r}"
        )
    require = raw.get("require_encryption", False)
    if not isinstance(require, bool):
        raise EncryptionSettingError(f"{where}.require_encryption: true or false, not {require!r}")
    return StorageEncryption(sse=sse, kms_key_id=kms, gcs_kms_key=gcs, require=require)


def add_sse_to_client(client: Any, setting: StorageEncryption | None = None) -> Any:
    """Makes every object write of a boto3 S3 client carry `setting` (default: `from_env`).

    A botocore event hook, so it covers callers we do not control (Beam's S3
    filesystem, boto3's managed transfers) as well as our own calls. A value
    the caller passed itself is kept.
    """
    setting = setting if setting is not None else from_env()
    wanted = setting.s3_params()
    if not wanted or getattr(client, "_tfxp_sse", None) == wanted:
        return client

    def add(params: dict[str, Any], **_: Any) -> None:  # botocore passes params=...
        for key, value in wanted.items():
            params.setdefault(key, value)

    for operation in S3_WRITE_OPERATIONS:
        client.meta.events.register(f"before-parameter-build.s3.{operation}", add)
    client._tfxp_sse = wanted  # noqa: SLF001 - our own mark on the client: its hook is registered once
    return client


def refuse_unencrypted(writer: str, why: str) -> None:
    """Under `require_encryption`: a writer that cannot encrypt stops the command."""
    raise EncryptionRequiredError(
        f"storage.require_encryption is set, and {writer} {why}; nothing was written "
        "(docs/protecting-data.md lists which writers can encrypt)"
    )
