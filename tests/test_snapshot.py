"""Which code a job ran, and running from a copy of it: the git state a job records, the
files a snapshot copies (and those it does not), its limit and hash, and a local job that
runs from its snapshot while its folder changes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from anylaunch.errors import ConfigError
from anylaunch.launch import provenance, snapshot

pytestmark = pytest.mark.usefixtures("spawns")  # git, and jobs


def git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    (folder / "train.py").write_text("print('train')\n")
    (folder / ".gitignore").write_text("data/\n*.ckpt\n")
    git(folder, "add", ".")
    git(folder, "commit", "-q", "-m", "first")
    return folder


def test_a_clean_tree_names_its_commit_and_branch(repo):
    found = provenance.read(str(repo))
    assert found == {
        "repo": str(repo),
        "commit": git(repo, "rev-parse", "HEAD"),
        "branch": "main",
        "dirty": False,
    }


def test_a_changed_tracked_file_makes_it_dirty_an_untracked_one_does_not(repo):
    (repo / "notes.txt").write_text("untracked\n")
    assert provenance.read(str(repo))["dirty"] is False  # type: ignore[index]
    (repo / "train.py").write_text("print('changed')\n")
    assert provenance.read(str(repo))["dirty"] is True  # type: ignore[index]
    git(repo, "add", "train.py")  # staged, not committed: still not the commit
    assert provenance.read(str(repo))["dirty"] is True  # type: ignore[index]


def test_a_subfolder_a_detached_head_and_a_remote_with_a_token(repo):
    (repo / "sub").mkdir()
    git(repo, "checkout", "-q", "--detach")
    git(repo, "remote", "add", "origin", "https://alice:ghp_t0ken@github.com/org/proj.git")
    found = provenance.read(str(repo / "sub"))
    assert found is not None
    assert found["branch"] is None and found["commit"] == git(repo, "rev-parse", "HEAD")
    assert found["repo"] == "https://github.com/org/proj.git"  # the token stays out


def test_outside_git_or_without_git_nothing_is_recorded(tmp_path, monkeypatch):
    assert provenance.read(str(tmp_path)) is None
    monkeypatch.setenv("PATH", str(tmp_path))  # no git at all: the submit goes on
    assert provenance.read(str(tmp_path)) is None


def test_a_snapshot_copies_tracked_and_untracked_files_but_not_ignored_ones(repo, tmp_path):
    (repo / "new.py").write_text("print('not yet added')\n")
    (repo / "data").mkdir()
    (repo / "data" / "big.bin").write_bytes(b"x" * 1000)
    (repo / "model.ckpt").write_bytes(b"y" * 1000)
    found = snapshot.survey(str(repo), 100)
    assert sorted(e.path for e in found.entries) == [".gitignore", "new.py", "train.py"]
    info = snapshot.take(found, tmp_path / "copy")
    assert sorted(p.name for p in (tmp_path / "copy").iterdir()) == [
        ".gitignore",
        "new.py",
        "train.py",
    ]
    assert info["files"] == 3 and info["sha256"].startswith("sha256:")


def test_a_link_is_copied_as_a_link_never_followed(repo, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret from outside the folder\n")
    (repo / "escape").symlink_to(outside)
    (repo / "inside").symlink_to("train.py")
    found = snapshot.survey(str(repo), 100)
    snapshot.take(found, tmp_path / "copy")
    copy = tmp_path / "copy"
    assert os.readlink(copy / "escape") == str(outside)
    assert os.readlink(copy / "inside") == "train.py"
    every = b"".join(p.read_bytes() for p in copy.rglob("*") if p.is_file() and not p.is_symlink())
    assert b"secret from outside" not in every


def test_outside_git_every_file_counts_and_the_limit_names_the_biggest(tmp_path, cli, write):
    folder = tmp_path / "plain"
    (folder / "venv").mkdir(parents=True)
    (folder / "train.py").write_text("print(1)\n")
    (folder / "venv" / "torch.so").write_bytes(os.urandom(1_500_000))
    with pytest.raises(ConfigError) as caught:
        snapshot.survey(str(folder), 1)
    message = caught.value.message
    assert "venv/torch.so (1.5 MB)" in message and "not in a git repository" in message
    path = write(
        f"launcher: none\ncommand: [cat, train.py]\nsnapshot: {{max_mb: 1}}\n"
        f"local: {{workdir: {folder}}}\n"
    )
    done = cli("run", str(path), "--json")
    assert done.rc == 2
    assert done.json()["error"]["code"] == "CONFIG"
    assert "snapshot" in done.json()["error"]["message"]
    assert cli("ps", "--json").json() == []  # nothing was recorded


def test_the_hash_follows_the_content_and_the_executable_bit(repo, tmp_path):
    first = snapshot.take(snapshot.survey(str(repo), 100), tmp_path / "a")
    again = snapshot.take(snapshot.survey(str(repo), 100), tmp_path / "b")
    assert first == again
    (repo / "train.py").chmod(0o755)
    mode = snapshot.take(snapshot.survey(str(repo), 100), tmp_path / "c")
    assert mode["sha256"] != first["sha256"]
    assert os.access(tmp_path / "c" / "train.py", os.X_OK)
    (repo / "train.py").write_text("print('other')\n")
    assert snapshot.take(snapshot.survey(str(repo), 100), tmp_path / "d") != mode


def test_a_local_job_runs_from_its_snapshot_and_records_a_dirty_commit(cli, repo, tmp_path):
    go = tmp_path / "go"
    (repo / "train.py").write_text("print('as submitted, not committed')\n")
    path = repo / "job.yaml"
    path.write_text(
        "launcher: none\nsnapshot: true\n"
        f"command: [bash, -c, 'while [ ! -f {go} ]; do sleep 0.1; done; python3 train.py; pwd']\n"
    )
    done = cli("run", str(path), "--detach", "--json", cwd=repo)
    assert done.rc == 0, done.err
    job_id = done.json()["id"]
    (repo / "train.py").write_text("print('edited while it waited')\n")
    go.touch()
    status = cli("status", job_id, "--json")
    for _ in range(300):
        if status.json()["state"] not in ("PENDING", "STARTING", "RUNNING"):
            break
        status = cli("status", job_id, "--json")
    summary = status.json()
    assert summary["state"] == "SUCCEEDED", summary
    logs = cli("logs", job_id).out
    assert "as submitted, not committed" in logs and "edited" not in logs
    assert f"{summary['job_dir']}/snapshot" in logs  # where it ran
    source = summary["source"]
    assert source["commit"] == git(repo, "rev-parse", "HEAD") and source["dirty"] is True
    copied = Path(summary["job_dir"]) / "snapshot"
    assert (copied / "train.py").read_text() == "print('as submitted, not committed')\n"
    assert source["snapshot"]["files"] == 3  # .gitignore, job.yaml, train.py


def test_a_backend_that_runs_its_image_refuses_a_snapshot(cli_inproc, write):
    path = write("command: [true]\nsnapshot: true\nlepton: {resource_shape: cpu.small}\n")
    done = cli_inproc("run", str(path), "--dry-run")
    assert done.rc == 2
    assert "job.yaml:2: snapshot:" in done.err and "cannot run from a snapshot" in done.err
