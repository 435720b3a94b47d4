"""Object storage (s3://, gs://) for data, pipeline roots and pushed models.

Two filesystems touch every remote location, each with its own client:

- TensorFlow (tf.io.gfile, and TFX's `fileio` on top of it) reads s3:// through
  tensorflow-io's plugin, which registers itself on `import tensorflow_io`. The
  import costs seconds, so it happens only when a location is s3://. gs:// is
  built into TensorFlow (tensorflow-io-gcs-filesystem).
- Beam (ExampleGen's CSV reading and TFRecord writing, Transform, TFMA) uses its
  boto3-based S3 filesystem and its own GCS client.

Both are configured from the standard AWS environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_PROFILE and
~/.aws/{config,credentials}) and the endpoint of an S3-compatible store from
AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL (boto3's names) or S3_ENDPOINT (the
TensorFlow S3 plugin's name). `prepare_s3_environment` maps whichever is set to
the names the other client reads, so one set of variables serves both, and no
endpoint or credential is ever passed in code or on a command line.

Beam gets no pipeline arguments for this: its S3 filesystem builds its boto3
client from the pipeline's (empty) S3 options, and boto3 falls back to the
same environment. Passing `--s3_*` flags instead would make TFX build an sdist
of itself for every Beam component (see pipeline/config.py).

Server-side encryption (`storage:` in the dataset file, components/io/encryption.py)
reaches every writer through the environment: `apply_encryption` exports it
before anything is written; boto3 clients made here and Beam's get a hook
that adds it to every object write, and the relay adds it to TensorFlow's.

`check_remote_locations` is the pre-flight: before any component runs it asks each
remote location's store, with short timeouts and few retries, whether the
bucket exists and the credentials may read (data) or write (pipeline root,
serving) there, so a typo, a missing bucket, bad credentials or an unreachable
endpoint cost seconds and one clear line instead of minutes of retries inside
TensorFlow's S3 client (which retries a refused connection for ~100 s per call
by default).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from urllib.parse import urlparse

# The one mapping of the endpoint variables, shared with the Arrow ingest's S3 client.
from components.io.encryption import (
    ENV_KMS_KEY_ID,
    ENV_SSE,
    EncryptionRequiredError,
    StorageEncryption,
    add_sse_to_client,
    export_env,
    from_env,
    refuse_unencrypted,
)
from components.io.object_storage import s3_endpoint

REMOTE_SCHEMES = ("s3", "gs")
# Retries of both S3 clients unless the user chose otherwise: the SDK defaults
# (C++: 10 attempts, ~100 s on a refused connection) make a dead endpoint look
# like a hang. AWS_MAX_ATTEMPTS/AWS_RETRY_MODE are read by boto3 and the C++ SDK.
DEFAULT_MAX_ATTEMPTS = "4"
DEFAULT_RETRY_MODE = "standard"
# Pre-flight probes: how long one request to a store may take.
PROBE_TIMEOUT_S = float(os.environ.get("TFXP_STORAGE_TIMEOUT", "10"))


class StorageError(RuntimeError):
    """A remote location is unusable; the message names it and says what to do."""


def scheme(uri: str) -> str:
    """'s3', 'gs', another URI scheme, or '' for a local path."""
    return uri.split("://", 1)[0].lower() if "://" in uri else ""


def is_remote(uri: str | os.PathLike) -> bool:
    return "://" in str(uri)


def split_uri(uri: str) -> tuple[str, str]:
    """(bucket, key prefix without leading slash) of s3://bucket/key or gs://bucket/key."""
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.lstrip("/")


def join(base: str, *parts: str) -> str:
    """os.path.join that keeps a URI's double slash."""
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


# ---------------------------------------------------------------------------
# Environment: one set of AWS variables for TensorFlow's and Beam's S3 clients.


def prepare_s3_environment(env: MutableMapping[str, str] = os.environ) -> None:
    """Maps the standard AWS variables to what TensorFlow's S3 plugin and boto3 read.

    Only fills in names the user did not set; never invents credentials.
    """
    endpoint = s3_endpoint(env)
    if endpoint:
        env.setdefault("AWS_ENDPOINT_URL_S3", endpoint)  # boto3 (Beam, pre-flight)
        env.setdefault("S3_ENDPOINT", endpoint)  # tensorflow-io
        if endpoint.startswith("http://"):
            env.setdefault("S3_USE_HTTPS", "0")
            env.setdefault("S3_VERIFY_SSL", "0")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if not region:
        try:
            import boto3

            region = boto3.session.Session().region_name  # ~/.aws/config, AWS_PROFILE
        except Exception:  # noqa: BLE001 - a broken config file is reported by the probe
            region = None
    region = region or "us-east-1"  # both SDKs' default; S3-compatible stores ignore it
    env.setdefault("AWS_REGION", region)
    env.setdefault("AWS_DEFAULT_REGION", region)
    env.setdefault("AWS_MAX_ATTEMPTS", DEFAULT_MAX_ATTEMPTS)
    env.setdefault("AWS_RETRY_MODE", DEFAULT_RETRY_MODE)
    # tensorflow-io 0.37.1's multi-part download returned zeros after the first
    # 512 KiB of a 1.9 MB object (read from SeaweedFS 4.48; boto3 read it
    # intact): silently corrupt input. Single-request reads are exact
    # (tests/s3/test_storage_s3.py reads a multi-MB object back byte for byte).
    env.setdefault("S3_DISABLE_MULTI_PART_DOWNLOAD", "1")


_s3_ready = False


def enable_filesystems(uris: Iterable[str]) -> None:
    """Makes TensorFlow able to open `uris`: imports tensorflow-io only for s3://."""
    global _s3_ready
    schemes = {scheme(u) for u in uris}
    if "s3" in schemes and not _s3_ready:
        prepare_s3_environment()
        from tfxp.storage.s3_shim import start_relay

        region = os.environ["AWS_REGION"]
        upstream = s3_endpoint() or f"https://s3.{region}.amazonaws.com"
        # TensorFlow's S3 client goes through the loopback relay (see s3_shim):
        # tensorflow-io 0.37.1 crashes on reads at the end of an object.
        os.environ["S3_ENDPOINT"] = start_relay(upstream, region)
        share_beam_s3_clients()
        try:
            import tensorflow_io  # noqa: F401 - registers the s3:// filesystem with TensorFlow
        except ImportError as e:
            raise StorageError(
                f"s3:// locations need tensorflow-io ({e}); reinstall with scripts/setup.sh"
            ) from None
        _s3_ready = True


class _SharedBoto3:
    """Stands for `boto3` inside Beam's S3 client: `session.Session().client(...)`
    returns one client per arguments and AWS environment, made once.

    Beam's S3 filesystem builds a new boto3 session and client for every file
    operation (exists, match, open, rename, delete), and a new session re-reads
    botocore's S3 service model: 0.23 s of CPU per operation measured here
    (0.004 s with one client), and a small taxi run makes about a hundred of
    them. boto3 clients are thread-safe; sessions are not, so clients are made
    under a lock. Beam keeps its per-download state in its own wrapper object,
    which is still made per operation.
    """

    _ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
            "AWS_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", ENV_SSE, ENV_KMS_KEY_ID)  # fmt: skip

    def __init__(self, boto3) -> None:
        import types

        self._boto3 = boto3
        self._clients: dict[tuple, object] = {}
        self._lock = threading.Lock()
        self.session = types.SimpleNamespace(Session=lambda: self)

    def client(self, **kwargs):
        key = repr((sorted(kwargs.items()), [os.environ.get(n) for n in self._ENV]))
        with self._lock:
            if key not in self._clients:
                client = self._boto3.session.Session().client(**kwargs)
                if kwargs.get("service_name", "s3") == "s3":
                    # Beam's S3 filesystem has no SSE option: the hook adds `storage:`'s.
                    add_sse_to_client(client)
                self._clients[key] = client
            return self._clients[key]

    def __getattr__(self, name: str):
        return getattr(self._boto3, name)


def share_beam_s3_clients() -> None:
    """Makes Beam's S3 filesystem reuse its boto3 clients (see `_SharedBoto3`)."""
    try:
        from apache_beam.io.aws.clients.s3 import boto3_client
    except ImportError:  # Beam without its AWS extra: no s3:// for Beam anyway
        return
    if boto3_client.boto3 is not None and not isinstance(boto3_client.boto3, _SharedBoto3):
        boto3_client.boto3 = _SharedBoto3(boto3_client.boto3)


# ---------------------------------------------------------------------------
# Pre-flight checks.


@dataclass(frozen=True)
class Location:
    uri: str
    what: str  # "data root", "pipeline root", "serving directory", ...
    write: bool


def _with_deadline(fn: Callable[[], None], seconds: float, what: str) -> None:
    """Runs `fn` in a thread; a store that never answers becomes a StorageError."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            fn()
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            outcome.append(e)

    thread = threading.Thread(target=target, name="storage-probe", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise StorageError(
            f"{what}: no answer within {seconds:.0f}s; check the network, proxy and "
            "endpoint (TFXP_STORAGE_TIMEOUT sets this limit)"
        )
    if outcome[0] is not None:
        raise outcome[0]


def s3_client():
    import boto3
    from botocore.config import Config

    client = boto3.session.Session().client(
        "s3",
        config=Config(
            connect_timeout=PROBE_TIMEOUT_S / 2,
            read_timeout=PROBE_TIMEOUT_S,
            retries={"max_attempts": 1, "mode": "standard"},
        ),
    )
    return add_sse_to_client(client)  # `storage:` on every object this client writes


def s3_error(loc: Location, e: BaseException) -> StorageError:
    from botocore import exceptions as bex

    bucket, _ = split_uri(loc.uri)
    endpoint = s3_endpoint() or "AWS S3"
    if isinstance(e, bex.NoCredentialsError):
        return StorageError(
            f"{loc.what} {loc.uri}: no AWS credentials found; set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE with ~/.aws/credentials)"
        )
    if isinstance(e, bex.EndpointConnectionError | bex.ConnectTimeoutError | bex.ReadTimeoutError):
        return StorageError(
            f"{loc.what} {loc.uri}: cannot reach the S3 endpoint {endpoint} ({e}); is the server "
            "running? Set AWS_ENDPOINT_URL to an S3-compatible store's URL (unset for AWS)"
        )
    if isinstance(e, bex.ClientError):
        code = str(e.response.get("Error", {}).get("Code", ""))
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in ("404", "NoSuchBucket", "NotFound") or status == 404:
            return StorageError(
                f"{loc.what} {loc.uri}: bucket '{bucket}' does not exist at {endpoint}; create it "
                f"(aws s3 mb s3://{bucket}) or use another bucket"
            )
        if code in (
            "403",
            "AccessDenied",
            "InvalidAccessKeyId",
            "SignatureDoesNotMatch",
            "Forbidden",
        ) or status in (401, 403):
            key = os.environ.get("AWS_ACCESS_KEY_ID", "")
            key_hint = f" (access key id {key[:4]}…)" if key else ""
            return StorageError(
                f"{loc.what} {loc.uri}: access denied by {endpoint} ({code or status}){key_hint}; "
                "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and the bucket's permissions"
            )
        return StorageError(f"{loc.what} {loc.uri}: {endpoint} answered {code or status}: {e}")
    if isinstance(e, bex.BotoCoreError):
        return StorageError(f"{loc.what} {loc.uri}: {e}")
    return StorageError(f"{loc.what} {loc.uri}: {type(e).__name__}: {e}")


SSE_PROBE = b"tfxp write test: 0123456789abcdef"


def check_sse_ranged_read(client, bucket: str, key: str, loc: Location) -> None:
    """A ranged read of an object written with `storage.sse` gives the bytes written.

    TensorFlow reads objects in ranges. SeaweedFS 4.48 stores SSE-S3 objects but
    answers a ranged GET of one with ciphertext (a full GET is right): every
    artifact TensorFlow read back would be silently wrong.
    """
    got = client.get_object(Bucket=bucket, Key=key, Range="bytes=5-14")["Body"].read()
    if got != SSE_PROBE[5:15]:
        raise StorageError(
            f"{loc.what} {loc.uri}: {s3_endpoint() or 'the S3 store'} returns wrong bytes for "
            "a ranged read of an object written with server-side encryption (storage.sse), "
            "and TensorFlow reads in ranges; unset storage.sse for this store (a local "
            "SeaweedFS encrypts its volumes itself: docs/protecting-data.md)"
        )


def _check_s3(loc: Location) -> None:
    bucket, prefix = split_uri(loc.uri)
    if not bucket:
        raise StorageError(f"{loc.what} {loc.uri}: no bucket in the URI (s3://BUCKET/path)")
    prepare_s3_environment()

    def probe() -> None:
        client = s3_client()
        client.head_bucket(Bucket=bucket)
        if loc.write:
            # Proves write and delete permission where the pipeline will write.
            key = join(prefix, f".tfxp-write-test-{uuid.uuid4().hex[:8]}").lstrip("/")
            client.put_object(Bucket=bucket, Key=key, Body=SSE_PROBE)
            try:
                if from_env().sse:
                    check_sse_ranged_read(client, bucket, key, loc)
            finally:
                client.delete_object(Bucket=bucket, Key=key)
        else:
            client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)

    try:
        _with_deadline(probe, PROBE_TIMEOUT_S * 2, f"{loc.what} {loc.uri}")
    except StorageError:
        raise
    except Exception as e:  # noqa: BLE001 - boto3's many error types become one StorageError naming the location
        raise s3_error(loc, e) from None


def _gcp_credentials_hint() -> str | None:
    """Where Google credentials would come from, without touching the network; None if nowhere."""
    explicit = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if explicit:
        return explicit if os.path.isfile(explicit) else None
    config_dir = os.environ.get("CLOUDSDK_CONFIG") or os.path.expanduser("~/.config/gcloud")
    adc = os.path.join(config_dir, "application_default_credentials.json")
    if os.path.isfile(adc):
        return adc
    try:  # on Google Cloud VMs the metadata server provides credentials
        with open("/sys/class/dmi/id/product_name") as f:
            if "Google" in f.read():
                return "the Compute Engine metadata server"
    except OSError:
        pass
    return None


def _check_gs(loc: Location) -> None:
    bucket, _ = split_uri(loc.uri)
    if not bucket:
        raise StorageError(f"{loc.what} {loc.uri}: no bucket in the URI (gs://BUCKET/path)")
    source = _gcp_credentials_hint()
    if source is None:
        explicit = os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
        missing = f" ({explicit} does not exist)" if explicit else ""
        raise StorageError(
            f"{loc.what} {loc.uri}: no Google Cloud credentials{missing}; set "
            "GOOGLE_APPLICATION_CREDENTIALS to a service-account key file or run "
            "`gcloud auth application-default login`"
        )

    def probe() -> None:
        from google.cloud import storage as gcs  # type: ignore[attr-defined]  # google-cloud-storage: untyped

        client = gcs.Client()
        if not client.bucket(bucket).exists(timeout=PROBE_TIMEOUT_S):
            raise StorageError(f"{loc.what} {loc.uri}: bucket '{bucket}' does not exist")
        if loc.write:
            check_gcs_default_key(client.get_bucket(bucket, timeout=PROBE_TIMEOUT_S), loc)

    try:
        _with_deadline(probe, PROBE_TIMEOUT_S * 2, f"{loc.what} {loc.uri} (Google Cloud Storage)")
    except StorageError:
        raise
    except Exception as e:  # noqa: BLE001 - the GCS client's many error types become one StorageError naming the location
        first = str(e).splitlines()[0][:200] if str(e) else type(e).__name__
        raise StorageError(
            f"{loc.what} {loc.uri}: Google Cloud Storage is unusable with the credentials from "
            f"{source} ({first}); check the network and the credentials"
        ) from None


def check_gcs_default_key(bucket, loc: Location) -> None:
    """With storage.gcs_kms_key: the bucket's default key must be that key.

    TensorFlow's and Beam's GCS clients send no per-object key, so what they
    write is encrypted with the bucket's default key: that is where CMEK is set
    (`gcloud storage buckets update gs://B --default-encryption-key=KEY`).
    """
    wanted = from_env().gcs_kms_key
    if not wanted:
        return
    actual = bucket.default_kms_key_name or ""
    # Google appends /cryptoKeyVersions/N to a key it reports; the key is what matters.
    if actual.split("/cryptoKeyVersions/")[0] != wanted:
        raise StorageError(
            f"{loc.what} {loc.uri}: storage.gcs_kms_key is {wanted}, but the bucket's default "
            f"encryption key is {actual or 'none (Google-managed)'}; set it with `gcloud storage "
            f"buckets update gs://{bucket.name} --default-encryption-key={wanted}`"
        )


def check_location(loc: Location) -> None:
    kind = scheme(loc.uri)
    if kind == "s3":
        _check_s3(loc)
    elif kind == "gs":
        _check_gs(loc)
    elif kind:
        raise StorageError(
            f"{loc.what} {loc.uri}: unsupported scheme '{kind}://' (local paths, s3:// or gs://)"
        )


def config_locations(config) -> list[Location]:
    """The remote locations of a PipelineConfig, data first."""
    found = [
        Location(config.data_root, "data root", write=False),
        Location(config.pipeline_root, "pipeline root", write=True),
        Location(config.serving_dir, "serving directory", write=True),
        Location(config.report_dir, "validation reports directory", write=True),
    ]
    return [loc for loc in found if is_remote(loc.uri)]


def apply_encryption(setting: StorageEncryption, locations: Iterable[Location]) -> None:
    """Exports `setting` to every writer, or refuses (StorageError) under
    `require_encryption` when a location's writers could write in the clear."""
    export_env(setting)
    if not setting.require:
        return
    for loc in locations:
        if not loc.write:
            continue
        kind = scheme(loc.uri)
        try:
            if kind == "s3" and not setting.sse:
                refuse_unencrypted(
                    f"{loc.what} {loc.uri}", "has no storage.sse (AES256 or aws:kms) to send"
                )
            if kind == "gs" and not setting.gcs_kms_key:
                refuse_unencrypted(
                    f"{loc.what} {loc.uri}",
                    "has no storage.gcs_kms_key: Google Cloud Storage objects are "
                    "encrypted only with Google's key unless the bucket's default CMEK key is set",
                )
        except EncryptionRequiredError as e:
            raise StorageError(str(e)) from None


def check_remote_locations(config) -> None:
    """Pre-flight for every remote location of `config`; raises StorageError."""
    locations = config_locations(config)
    setting = getattr(config, "storage", StorageEncryption())
    # A config without `storage:` keeps what the environment already says (an
    # Airflow worker's or a pod's TFXP_S3_SSE), rather than clearing it.
    apply_encryption(setting if setting.active else from_env(), locations)
    for loc in locations:
        check_location(loc)
    enable_filesystems(loc.uri for loc in locations)
