"""runtime/beam_workers.py: what a worker installs, and once per code version."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from runtime import beam_workers


def _sdist(path: Path, files: dict[str, bytes], mtime: int) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            tar.addfile(info, io.BytesIO(data))
    return path


def test_staged_packages_install_in_beams_order_and_nothing_else(tmp_path: Path) -> None:
    staged = [
        str(tmp_path / n)
        for n in ("submission_environment_dependencies.txt", "workflow.tar.gz", "b.whl", "a.tar.gz")
    ]
    (tmp_path / "extra_packages.txt").write_text("a.tar.gz\nb.whl\n")
    staged.append(str(tmp_path / "extra_packages.txt"))
    assert beam_workers.packages_to_install(staged) == [
        str(tmp_path / "a.tar.gz"),
        str(tmp_path / "b.whl"),
        str(tmp_path / "workflow.tar.gz"),
    ]
    assert beam_workers.packages_to_install([str(tmp_path / "pickled_main_session")]) == []


def test_content_key_ignores_timestamps_not_content(tmp_path: Path) -> None:
    files = {"p/pipeline/beam.py": b"x = 1\n", "p/PKG-INFO": b"Name: p\n"}
    one = _sdist(tmp_path / "1.tar.gz", files, mtime=1_000)
    two = _sdist(tmp_path / "2.tar.gz", files, mtime=2_000)
    edited = _sdist(tmp_path / "3.tar.gz", {**files, "p/pipeline/beam.py": b"x = 2\n"}, 1_000)
    assert one.read_bytes() != two.read_bytes()
    assert beam_workers.content_key(str(one)) == beam_workers.content_key(str(two))
    assert beam_workers.content_key(str(one)) != beam_workers.content_key(str(edited))


def test_install_runs_pip_once_per_code_version(tmp_path: Path, monkeypatch) -> None:
    calls = []

    def fake_pip(args, **kwargs):
        calls.append(args)
        target = args[args.index("--target") + 1]
        os.makedirs(target)
        assert kwargs["cwd"] == str(tmp_path / "cache")  # never builds inside the checkout
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(beam_workers.subprocess, "run", fake_pip)
    files = {"p/trainer/model.py": b"m\n"}
    first = beam_workers.install(
        [str(_sdist(tmp_path / "a.tar.gz", files, 1))], str(tmp_path / "cache")
    )
    again = beam_workers.install(
        [str(_sdist(tmp_path / "b.tar.gz", files, 2))], str(tmp_path / "cache")
    )
    assert first == again and os.path.isdir(first) and len(calls) == 1
    assert "--no-deps" in calls[0] and str(tmp_path / "a.tar.gz") in calls[0]
    assert not list((tmp_path / "cache").glob("*.partial"))


def test_boot_script_runs_this_module_with_the_work_dir(tmp_path: Path) -> None:
    path = beam_workers.write_boot_script(str(tmp_path))
    assert os.access(path, os.X_OK)
    text = Path(path).read_text()
    assert f'--work-dir "{tmp_path}" "$@"' in text and "beam_workers.py" in text


def test_boot_script_of_warm_workers_names_the_zygote(tmp_path: Path) -> None:
    text = Path(beam_workers.write_boot_script(str(tmp_path), "/tmp/x/socket:42")).read_text()
    assert f'--work-dir "{tmp_path}" --zygote "/tmp/x/socket:42" "$@"' in text


def test_boot_script_runs_the_boot_and_logs_why_a_worker_could_not_start(tmp_path: Path) -> None:
    """As Beam's pool starts it: the boot runs (into the worker's log) and fails clearly on a
    provision service that is not there, instead of exiting 0 with nothing started."""
    boot = beam_workers.write_boot_script(str(tmp_path))
    endpoints = [f"--{n}_endpoint=127.0.0.1:9" for n in ("logging", "artifact", "provision")]
    done = subprocess.run(
        [boot, "--id=worker_7", *endpoints, "--control_endpoint=127.0.0.1:9"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode != 0
    [log] = tmp_path.glob("workers/worker_7-*/worker.log")
    assert "127.0.0.1:9" in log.read_text()


@pytest.mark.parametrize("warm", [True, False])
def test_worker_pool_listens_and_stops(tmp_path: Path, warm: bool) -> None:
    grpc = pytest.importorskip("grpc")
    pool = beam_workers.WorkerPool(str(tmp_path), port=0, warm=warm)
    zygote = int(pool.zygote.address().rsplit(":", 1)[1]) if pool.zygote else None
    try:
        host, port = pool.address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        grpc.channel_ready_future(grpc.insecure_channel(pool.address)).result(timeout=30)
        assert ("--zygote" in (tmp_path / "boot").read_text()) is warm
    finally:
        pool.stop()
    assert (zygote is not None) is warm
    if zygote:  # stopped with the pool, even mid-import (it had no worker to wait for)
        assert not os.path.exists(f"/proc/{zygote}")


def test_a_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}: in use"):
            beam_workers.WorkerPool(str(tmp_path), port=port)
    assert not (tmp_path / "zygote.log").exists()  # no zygote for a pool that never served


def test_services_that_do_not_answer_are_named_before_the_run(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"  # nothing listens once closed
    pool = beam_workers.WorkerPool(str(tmp_path), port=0, warm=False)
    try:
        args = ["--runner=PortableRunner", f"--job_endpoint={dead}", "--environment_type=EXTERNAL"]
        with pytest.raises(beam_workers.BeamServiceError, match=f"job service at {dead} does not"):
            beam_workers.check_services([*args, f"--environment_config={pool.address}"], 2)
        with pytest.raises(
            beam_workers.BeamServiceError, match=f"worker pool at {dead}.*tfxp beam"
        ):
            beam_workers.check_services(
                [
                    args[0],
                    f"--job_endpoint={pool.address}",
                    args[2],
                    f"--environment_config={dead}",
                ],
                2,
            )
        # Both answer (the pool's port stands in for a job service: a gRPC server is up).
        beam_workers.check_services(
            [f"--job_endpoint={pool.address}", f"--environment_config={pool.address}", args[2]], 5
        )
        beam_workers.check_services(["--direct_num_workers=2"])  # nothing to probe
    finally:
        pool.stop()
