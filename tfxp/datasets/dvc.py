"""DVC repositories as a data source and a publisher (`tfxp data add --dvc`, `tfxp data tag --dvc`).

Reading goes through DVC's own Python API (`dvc.api.DVCFileSystem`): a
revision's `.dvc` files say which bytes (md5) belong at a path, and DVC
serves them from the repository's cache or fetches them from its configured
remote. Publishing adds files with `Repo.add`, commits the `.dvc` file with
git, tags the commit and pushes to the remote when one is configured.

Every failure is a `DvcError` naming the repository, path and revision, and
raised before anything is written where the data goes.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from components.io.encryption import StorageEncryption, from_env

# DVC's CLI reports usage and looks for updates over the network; the Python API
# honours the same switches. Tests and CI have no network to give it.
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("DVC_NO_UPDATE", "1")

INSTALL_HINT = (
    "DVC is not installed in this environment; it is in requirements.lock "
    "(rerun scripts/setup.sh, or `pip install 'dvc>=3,<4'`)"
)


class DvcError(ValueError):
    """A DVC repository cannot serve or take what was asked; the message says what to do."""


@dataclass(frozen=True)
class DvcOrigin:
    """Where a span's bytes came from: a path of a DVC repository at one revision."""

    repo: str  # as given, a local path made absolute
    path: str  # inside the repository
    rev: str  # as given (a tag, branch or commit)
    commit: str  # the git commit it resolved to
    dvc_md5: str  # the md5 DVC records for `path` (`<md5>.dir` for a directory)
    remote: str  # the repository's default DVC remote at that revision ("" when none)
    files: tuple[str, ...]  # data files under `path`, relative to the repository

    def to_dict(self) -> dict[str, str]:
        out = asdict(self)
        out["files"] = ",".join(self.files)
        return out


def _dvc():
    try:
        import dvc.api  # noqa: F401 - imported for its side effect of checking the install
    except ImportError as e:
        raise DvcError(f"{INSTALL_HINT} ({e})") from None
    from dvc.api import DVCFileSystem

    return DVCFileSystem


def is_url(repo: str) -> bool:
    """A git URL (https://, ssh://, file://, git@host:...) rather than a local clone."""
    return "://" in repo or repo.startswith("git@")


def normalized_repo(repo: str) -> str:
    """A local path as an absolute path (how it is recorded); URLs as given."""
    return repo if is_url(repo) else os.path.abspath(os.path.expanduser(repo))


def _default_remote(dvc_repo) -> str:
    config = dvc_repo.config
    name = config["core"].get("remote")
    # DVCFileSystem names the repository's own cache as a remote when none is configured.
    if not name or name == "auto-generated-upstream":
        return ""
    return str(config.get("remote", {}).get(name, {}).get("url", name))


def open_revision(repo: str, rev: str | None):
    """A `DVCFileSystem` at `rev` (None: the commit checked out), or DvcError."""
    from dvc.exceptions import DvcException

    filesystem = _dvc()
    where = normalized_repo(repo)
    if not is_url(where) and not os.path.isdir(where):
        raise DvcError(f"DVC repository {where} does not exist (--dvc takes a path or git URL)")
    try:
        fs = filesystem(where, rev=rev or "HEAD")
        fs.repo  # noqa: B018 - opens the repository and resolves `rev` now, not on first read
    except DvcException as e:
        kind = type(e).__name__
        if kind == "RevError" or "revision" in str(e).lower():
            tags = "" if is_url(where) else f" (tags there: {', '.join(_tags(where)) or 'none'})"
            raise DvcError(
                f"revision {rev!r} does not exist in DVC repository {where}{tags}; "
                "pass a tag, branch or commit"
            ) from None
        raise DvcError(f"{where} is not a usable DVC repository at {rev!r}: {e}") from None
    return fs


def _tags(repo: str) -> list[str]:
    try:
        from scmrepo.git import Git

        return sorted(r.rsplit("/", 1)[-1] for r in Git(repo).iter_refs(base="refs/tags/"))
    except Exception:  # noqa: BLE001 - a URL, or no git: the message then lists none
        return []


def resolve(repo: str, path: str, rev: str | None) -> DvcOrigin:
    """What `path` is at `rev` in `repo`: its commit, DVC md5 and data files (no bytes read)."""
    fs = open_revision(repo, rev)
    where = normalized_repo(repo)
    path = path.strip("/")
    at = f"{path} at {rev or 'HEAD'} in DVC repository {where}"
    try:
        info = fs.info(path)
    except FileNotFoundError:
        raise DvcError(f"{at}: no such path (check --path against the repository)") from None
    md5 = info.get("md5") or (info.get("dvc_info") or {}).get("md5")
    if not md5:
        raise DvcError(f"{at}: not tracked by DVC (no .dvc file or dvc.lock entry records it)")
    if info["type"] == "directory":
        files = tuple(sorted(f.lstrip("/") for f in fs.find(path, detail=False)))
    else:
        files = (path,)
    return DvcOrigin(
        repo=where,
        path=path,
        rev=rev or "HEAD",
        commit=fs.repo.scm.resolve_rev(rev or "HEAD"),
        dvc_md5=str(md5),
        remote=_default_remote(fs.repo),
        files=files,
    )


def fetch(origin: DvcOrigin, dest: Path, suffix: str = ".csv") -> list[Path]:
    """Copies the origin's `suffix` files (names kept, flattened) into `dest`.

    DVC serves each file from the repository's cache or its remote; a file that
    neither holds is a DvcError naming the remote to push to.
    """
    fs = open_revision(origin.repo, origin.rev)
    wanted = [f for f in origin.files if f.endswith(suffix)]
    if not wanted:
        raise DvcError(
            f"{origin.path} at {origin.rev} in {origin.repo} holds no {suffix} files "
            f"(it holds: {', '.join(origin.files[:5]) or 'nothing'})"
        )
    written = []
    for name in wanted:
        target = dest / os.path.basename(name)
        if target.exists():
            raise DvcError(f"two files under {origin.path} share the name {target.name}")
        try:
            fs.get_file(name, str(target))
        except FileNotFoundError:
            raise DvcError(_missing_bytes(origin, name)) from None
        _check_bytes(origin, name, fs.info(name), target)
        written.append(target)
    return written


def _check_bytes(origin: DvcOrigin, name: str, info: dict, target: Path) -> None:
    """The fetched file's md5 is the one DVC records, or DvcError.

    DVC hands over what its remote returns without checking it (a remote's
    `verify` is off by default): a corrupt or tampered object, or a store that
    garbles reads (SeaweedFS answers ranged reads of SSE objects with ciphertext,
    and DVC reads in ranges), would become a span recorded under the md5 it is not.
    Outputs hashed the DVC 2 way (`md5-dos2unix`, line endings normalised) are not
    raw-byte md5s: those are left to DVC.
    """
    expected = info.get("md5")
    entry = (info.get("dvc_info") or {}).get("entry")
    kind = getattr(getattr(entry, "hash_info", None), "name", "md5")
    if not expected or kind != "md5":
        return
    digest = hashlib.md5(usedforsecurity=False)
    with target.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        source = f"its remote {origin.remote}" if origin.remote else "its cache"
        raise DvcError(
            f"{name} at {origin.rev} in DVC repository {origin.repo}: the bytes read (md5 "
            f"{digest.hexdigest()}) are not the ones DVC records (md5 {expected}); {source} "
            "returned other bytes (a corrupt or altered object, or a store that garbles "
            "reads); nothing was added"
        )


def _missing_bytes(origin: DvcOrigin, name: str) -> str:
    where = f"{name} at {origin.rev} (md5 {origin.dvc_md5}) in DVC repository {origin.repo}"
    if not origin.remote:
        return (
            f"{where}: not in the repository's cache and no DVC remote is configured; "
            "add one where the data was pushed (`dvc remote add -d NAME URL`) and commit it"
        )
    return (
        f"{where}: not in the repository's cache nor in its remote {origin.remote}; "
        "`dvc push` it from the repository that has it"
    )


# ---------------------------------------------------------------------------
# Publishing into a repository.


def _local_repo(repo: str):
    _dvc()
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    where = normalized_repo(repo)
    if is_url(where):
        raise DvcError(f"{where}: publishing needs a local clone of the repository (a path)")
    try:
        return Repo(where)
    except DvcException as e:
        raise DvcError(f"{where} is not a DVC repository ({e}); `dvc init` it first") from None


def dirty(repo: str, targets: Sequence[str] = ()) -> list[str]:
    """What is uncommitted in a local repository: git changes, then DVC data changed
    from its `.dvc` files (limited to `targets` when given)."""
    r = _local_repo(repo)
    try:
        changed = [f"{p} (git)" for p in _git_changes(r)]
        # DVC resolves targets against the working directory, not the repository.
        paths = [os.path.join(r.root_dir, t) for t in targets]
        status = r.status(targets=paths or None)
        for stage, changes in sorted(status.items()):
            words = _describe(changes)
            if words:  # "not in cache" only: the workspace still matches its .dvc file
                where = os.path.relpath(os.path.abspath(stage), r.root_dir)
                changed.append(f"{where} ({words})")
        return changed
    finally:
        r.close()


def _git(root, *argv: str) -> str:
    """git in the repository; its own message on failure (no identity, a hook refusing)."""
    import subprocess

    done = subprocess.run(["git", *argv], cwd=root, capture_output=True, text=True)  # noqa: S603, S607 - the user's git (from PATH), arguments built here, no shell
    if done.returncode:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise DvcError(
            f"git {argv[0]} in {root} failed: {detail[-1] if detail else done.returncode}"
        )
    return done.stdout


def _git_changes(r) -> list[str]:
    out = _git(r.root_dir, "status", "--porcelain")
    return [line[3:] for line in out.splitlines() if line.strip()]


def _describe(changes) -> str:
    """DVC status entries ({'changed outs': {'data/t.csv': 'modified'}}) as words."""
    words: list[str] = []
    for change in changes if isinstance(changes, list) else [changes]:
        details = change.values() if isinstance(change, dict) else [change]
        for detail in details:
            if isinstance(detail, dict):
                words.extend(f"{k} {v}" for k, v in detail.items() if v != "not in cache")
            elif detail != "not in cache":
                words.append(str(detail))
    return ", ".join(words)


@dataclass(frozen=True)
class Published:
    repo: str
    path: str
    tag: str
    commit: str
    dvc_md5: str
    pushed_to: str  # the remote, "" when none is configured


def remote_encryption_problem(dvc_repo, setting: StorageEncryption) -> str | None:
    """Why a push to the default remote could store data unencrypted under `setting`.

    DVC's S3 remotes send SSE themselves when their config says so (`dvc remote
    modify NAME sse AES256|aws:kms`, `sse_kms_key_id`); nothing of ours is in
    their path, so the remote's own config must carry it. GCS remotes use the
    bucket's default key (storage.gcs_kms_key, checked by `tfxp run`'s
    pre-flight for the run's buckets, not for DVC's).
    """
    config = dvc_repo.config
    name = config["core"].get("remote")
    if not name or name == "auto-generated-upstream" or not (setting.sse or setting.require):
        return None
    remote = dict(config.get("remote", {}).get(name, {}))
    url = str(remote.get("url", ""))
    kind = url.split("://", 1)[0].lower() if "://" in url else ""
    if kind == "s3":
        wanted = setting.sse or "AES256 or aws:kms"
        if remote.get("sse") is None or (setting.sse and remote.get("sse") != setting.sse):
            return (
                f"DVC remote {name!r} ({url}) does not set sse {wanted}: run `dvc remote "
                f"modify {name} sse {setting.sse or 'AES256'}` in the repository and commit it"
            )
        if setting.kms_key_id and remote.get("sse_kms_key_id") != setting.kms_key_id:
            return (
                f"DVC remote {name!r} ({url}) does not use KMS key {setting.kms_key_id}: run "
                f"`dvc remote modify {name} sse_kms_key_id {setting.kms_key_id}`"
            )
        return None
    if kind and setting.require and not (kind == "gs" and setting.gcs_kms_key):
        return (
            f"DVC remote {name!r} ({url}): storage.require_encryption is set and this "
            "project cannot make DVC encrypt what it pushes there"
        )
    return None


def publish(
    repo: str,
    files: Sequence[tuple[str, str]],
    dest: str,
    tag: str,
    message: str,
    encryption: StorageEncryption | None = None,
) -> Published:
    """Adds `files` ((source, path under `dest`) pairs, copied into the repository) to DVC,
    commits the `.dvc` file, tags the commit and pushes to the default remote if any.

    Refuses a repository with uncommitted changes, an existing `dest` or tag;
    on failure before the commit, the repository is left as it was.
    """
    r = _local_repo(repo)
    root = Path(r.root_dir)
    try:
        changed = dirty(str(root))
        if changed:
            raise DvcError(
                f"DVC repository {root} has uncommitted changes ({'; '.join(changed[:5])}); "
                "commit or discard them first: a tag must name exactly what it holds"
            )
        if tag in _tags(str(root)):
            raise DvcError(f"tag {tag!r} already exists in {root}; pass another --tag")
        problem = remote_encryption_problem(r, encryption or from_env())
        if problem:  # before anything is copied, committed or pushed
            raise DvcError(f"{problem}; nothing was published")
        target = root / dest
        if target.exists() or Path(f"{target}.dvc").exists():
            raise DvcError(f"{target} already exists in {root}; pass another --path")
        return _add_commit_tag(r, files, target, tag, message)
    finally:
        r.close()


def _add_commit_tag(
    r, files: Sequence[tuple[str, str]], target: Path, tag: str, message: str
) -> Published:
    root = Path(r.root_dir)
    rel = os.path.relpath(target, root)
    gitignore = target.parent / ".gitignore"
    had_gitignore = gitignore.read_text() if gitignore.exists() else None
    try:
        for source, name in files:
            out = target / name
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, out)
        # DVC resolves targets against the working directory: absolute paths. Its
        # "To track the changes with git, run: ..." hint is what happens next here.
        r.scm_context.quiet = True
        [stage] = r.add(str(target))
        _git(root, "add", f"{rel}.dvc", os.path.relpath(gitignore, root))
        _git(root, "commit", "-q", "-m", message)
    except Exception as e:  # noqa: BLE001 - any failure undoes the half-made add, then is reported as a DvcError
        shutil.rmtree(target, ignore_errors=True)
        Path(f"{target}.dvc").unlink(missing_ok=True)
        if had_gitignore is None:
            gitignore.unlink(missing_ok=True)
        else:
            gitignore.write_text(had_gitignore)
        raise DvcError(f"could not add {rel} to DVC repository {root}: {e}") from None
    commit = _git(root, "rev-parse", "HEAD").strip()
    _git(root, "tag", "-a", tag, "-m", message, commit)
    remote = _default_remote(r)
    if remote:
        try:
            r.push(targets=[str(target)])
        except Exception as e:  # noqa: BLE001 - DVC's own errors: an unreachable or read-only remote
            raise DvcError(
                f"{rel} is committed ({commit[:12]}) and tagged {tag} in {root}, but pushing it "
                f"to the DVC remote {remote} failed ({e}); run `dvc push` there"
            ) from None
    return Published(str(root), rel, tag, commit, str(stage.outs[0].hash_info.value), remote)
