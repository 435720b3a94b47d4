"""Which request columns a log may hold: the dataset file's `request_log:` policy.

```yaml
request_log:
  hash: [customer_id, name]      # logged as keyed HMAC-SHA256 categories
  drop: [email]                  # never logged
  keep: [amount]                 # logged as sent (the default for unlisted columns)
  others: keep                   # or drop: only `keep` and `hash` columns are logged
  key_env: TFXP_LOG_HASH_KEY     # where the HMAC key comes from (default)
  key_file: ~/.config/tfxp/log-hash-key   # or a file only its owner can read
```

The request log (serving/request_log.py), `tfxp infer`'s outputs where they
echo input columns (tfxp/models/infer.py) and the validation gate's skew
check (components/validation/hashed_columns.py) all read the policy from
here. A hashed value is `h:` and 32 hex digits of HMAC-SHA256(key, value):
the same value always gives the same category, so distributions can still be
compared, but without the key nobody can test a guessed name against the log.

The key never lives in the repository: it comes from an environment variable
or a file readable by its owner only, and a policy that hashes refuses to
start without it. The policy's fingerprint (its rules and an id derived from
the key) is written into every logged record (`__policy`), so a reader can
tell a log written under another policy, or another key, from this one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from runtime.access import SecretFileError, check_owner_only

ACTIONS = ("keep", "hash", "drop")
POLICY_KEYS = {"hash", "drop", "keep", "others", "key_env", "key_file"}
DEFAULT_KEY_ENV = "TFXP_LOG_HASH_KEY"
HASH_PREFIX = b"h:"
HASH_HEX_DIGITS = 32  # 128 bits of the HMAC: collisions are not a concern for categories
MIN_KEY_BYTES = 16
# The fingerprint of records logged without any policy (every column kept as sent).
NO_POLICY = "none"


class LogPolicyError(ValueError):
    """A policy that cannot be used (bad setting, missing or exposed key); names what."""


@dataclass(frozen=True)
class LogPolicy:
    hash: tuple[str, ...] = ()
    drop: tuple[str, ...] = ()
    keep: tuple[str, ...] = ()
    others: str = "keep"
    key_env: str = DEFAULT_KEY_ENV
    key_file: str | None = None

    def action(self, column: str) -> str:
        if column in self.hash:
            return "hash"
        if column in self.drop:
            return "drop"
        if column in self.keep:
            return "keep"
        return self.others

    def rules(self) -> dict[str, Any]:
        """What decides the logged content (not where the key comes from)."""
        return {
            "hash": sorted(self.hash),
            "drop": sorted(self.drop),
            "keep": sorted(self.keep),
            "others": self.others,
        }

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> LogPolicy | None:
        if not text:
            return None
        raw: dict[str, Any] = json.loads(text)
        fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
        return cls(**fields)


def read_policy(raw: Any, where: str) -> LogPolicy | None:
    """The dataset file's `request_log:` mapping, checked (None when absent or empty)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise LogPolicyError(f"{where}: a mapping of {sorted(POLICY_KEYS)}, not {raw!r}")
    unknown = set(raw) - POLICY_KEYS
    if unknown:
        raise LogPolicyError(
            f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(POLICY_KEYS)}"
        )
    lists: dict[str, tuple[str, ...]] = {}
    for action in ACTIONS:
        value = raw.get(action) or []
        if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
            raise LogPolicyError(f"{where}.{action}: a list of column names, not {value!r}")
        lists[action] = tuple(value)
    seen: dict[str, str] = {}
    for action, columns in lists.items():
        for column in columns:
            if column in seen:
                raise LogPolicyError(
                    f"{where}: column {column!r} is under both {seen[column]} and {action}"
                )
            seen[column] = action
    others = raw.get("others", "keep")
    if others not in ("keep", "drop"):
        raise LogPolicyError(f"{where}.others: keep or drop, not {others!r}")
    key_env = raw.get("key_env", DEFAULT_KEY_ENV)
    if not isinstance(key_env, str) or not key_env.replace("_", "a").isalnum():
        raise LogPolicyError(f"{where}.key_env: an environment variable's name, not {key_env!r}")
    key_file = raw.get("key_file")
    if key_file is not None and not isinstance(key_file, str):
        raise LogPolicyError(f"{where}.key_file: a path, not {key_file!r}")
    return LogPolicy(others=others, key_env=key_env, key_file=key_file, **lists)


def load_key(policy: LogPolicy, env: Mapping[str, str] = os.environ) -> bytes:
    """The HMAC key: the environment variable, else the key file (owner-only)."""
    value = env.get(policy.key_env, "")
    if value:
        key = value.encode()
        source = f"${policy.key_env}"
    elif policy.key_file:
        path = Path(policy.key_file).expanduser()
        try:
            check_owner_only(path, "request_log.key_file")
        except SecretFileError as e:
            raise LogPolicyError(str(e)) from None
        key = path.read_bytes().strip()
        source = str(path)
    else:
        raise LogPolicyError(
            f"request_log hashes {list(policy.hash)} but no key is set: export "
            f"{policy.key_env} (at least {MIN_KEY_BYTES} bytes, e.g. `openssl rand -hex 32`) "
            "or set request_log.key_file to a file only you can read; never commit the key"
        )
    if len(key) < MIN_KEY_BYTES:
        raise LogPolicyError(
            f"the request-log key from {source} is shorter than {MIN_KEY_BYTES} bytes"
        )
    return key


def hash_value(key: bytes, value: bytes) -> bytes:
    digest = hmac.new(key, value, hashlib.sha256).hexdigest()[:HASH_HEX_DIGITS]
    return HASH_PREFIX + digest.encode()


def canonical(value: Any) -> bytes:
    """The bytes a value is hashed as: text as UTF-8, numbers as their shortest decimal."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, float):
        return repr(float(value)).encode()
    return str(value).encode()


def fingerprint(policy: LogPolicy | None, key: bytes | None = None) -> str:
    """What records logged under `policy` (and `key`) carry in `__policy`."""
    if policy is None:
        return NO_POLICY
    rules = json.dumps(policy.rules(), sort_keys=True)
    if policy.hash and key is not None:
        # A key id, not the key: tells a log hashed with another key apart.
        rules += hmac.new(key, b"tfxp request-log key id", hashlib.sha256).hexdigest()[:16]
    return hashlib.sha256(rules.encode()).hexdigest()[:16]


class Applier:
    """A policy with its key, ready to apply to values, examples and tables."""

    def __init__(self, policy: LogPolicy | None, env: Mapping[str, str] = os.environ) -> None:
        self.policy = policy
        self.key = load_key(policy, env) if policy is not None and policy.hash else None
        self.fingerprint = fingerprint(policy, self.key)

    def action(self, column: str) -> str:
        return self.policy.action(column) if self.policy is not None else "keep"

    @property
    def changes_anything(self) -> bool:
        p = self.policy
        return p is not None and bool(p.hash or p.drop or p.others == "drop")

    def hashed(self, values: Iterable[Any]) -> list[bytes]:
        if self.key is None:
            raise LogPolicyError("the request-log policy hashes columns but no key was loaded")
        return [hash_value(self.key, canonical(v)) for v in values]

    def example(self, serialized: bytes) -> bytes:
        """A serialized tf.Example with the policy applied to its features."""
        if not self.changes_anything:
            return serialized
        from tensorflow.core.example import example_pb2

        try:
            ex = example_pb2.Example.FromString(serialized)
        except Exception:  # noqa: BLE001 - not a tf.Example: nothing of it may be logged
            return b""
        features = ex.features.feature
        for name in list(features):
            action = self.action(name)
            if action == "drop":
                del features[name]
            elif action == "hash":
                feature = features[name]
                kind = feature.WhichOneof("kind")
                values = list(getattr(feature, kind).value) if kind else []
                feature.Clear()
                feature.bytes_list.value.extend(self.hashed(values))
        return ex.SerializeToString()

    def column(self, name: str, values: Iterable[Any]) -> list[Any] | None:
        """A column as it may be written out: hashed, None to drop it, or as given."""
        action = self.action(name)
        if action == "drop":
            return None
        if action == "hash":
            return [None if v is None else self.hashed([v])[0].decode() for v in values]
        return list(values)
