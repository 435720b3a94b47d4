"""lakeFS's layout over S3 (`s3://REPO/REF/...`) against SeaweedFS: which branch and commit.

lakeFS itself does not install here; SeaweedFS serves the same S3 layout. It reports
no commit of its own, so the commit sources are exercised as an endpoint can give them:
a commit id as the ref, or the commit in the object's user metadata.
"""

from __future__ import annotations

from tfxp.storage import branches

COMMIT = "a" * 64


def test_parse_takes_repo_and_ref_from_s3_roots_only():
    assert branches.parse("s3://repo/main/taxi") == ("repo", "main")
    assert branches.parse("s3://repo/main") == ("repo", "main")
    assert branches.parse("s3://repo") is None
    assert branches.parse("gs://repo/main/taxi") is None
    assert branches.parse("/data/taxi") is None


def test_a_commit_id_ref_is_the_commit_without_asking_the_endpoint():
    ref = branches.bucket_ref(f"s3://repo/{COMMIT}/taxi", "s3://unused/key", client=object())
    assert (ref.branch, ref.commit, ref.commit_from) == ("", COMMIT, "ref")


def test_the_commit_an_endpoint_reports_is_read_from_the_object(seaweedfs):
    client = seaweedfs.client()
    seaweedfs.create_bucket("lakefs-repo")
    client.put_object(Bucket="lakefs-repo", Key="main/taxi/span-1/plain.csv", Body=b"a\n1\n")
    client.put_object(
        Bucket="lakefs-repo",
        Key="main/taxi/span-1/tagged.csv",
        Body=b"a\n1\n",
        Metadata={"lakefs-commit": "c0ffee"},
    )
    root = "s3://lakefs-repo/main/taxi"
    plain = branches.bucket_ref(root, f"{root}/span-1/plain.csv", client=client)
    assert (plain.repo, plain.branch, plain.commit, plain.commit_from) == (
        "lakefs-repo",
        "main",
        "",
        "",
    )
    tagged = branches.bucket_ref(root, f"{root}/span-1/tagged.csv", client=client)
    assert (tagged.branch, tagged.commit, tagged.commit_from) == ("main", "c0ffee", "endpoint")


def test_a_commit_header_wins_over_metadata():
    head = {
        "ResponseMetadata": {"HTTPHeaders": {"x-lakefs-commit": "from-header"}},
        "Metadata": {"commit": "from-metadata"},
    }
    assert branches.commit_reported(head) == "from-header"
    assert branches.commit_reported({"Metadata": {"Commit": "m"}}) == "m"
    assert branches.commit_reported({}) == ""


def test_run_lakefs_refuses_a_root_not_in_the_layout(tmp_path, capsys):
    from tfxp.cli import main

    argv = ["run", "--lakefs", "--data-root", str(tmp_path / "d"), "--run-dir", str(tmp_path)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"--lakefs: data root {tmp_path / 'd'} is not s3://REPO/BRANCH/..." in err
    assert not (tmp_path / "metadata.sqlite").exists()  # nothing ran
