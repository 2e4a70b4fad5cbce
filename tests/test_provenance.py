"""code.diff in a run folder: the tracked, uncommitted changes of the repository a run started
in, which `git apply` puts back on the recorded commit; never untracked files."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tracerl.trainers.provenance import write_code_diff

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "agent.py").write_text("PROMPT = 'old'\n")
    (repo / "reward.py").write_text("SCALE = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "first")
    return repo


def test_the_diff_restores_the_code_on_its_commit_and_leaves_untracked_files_out(repo, tmp_path):
    (repo / "agent.py").write_text("PROMPT = 'new'\n")  # unstaged
    (repo / "reward.py").write_text("SCALE = 2\n")
    _git(repo, "add", "reward.py")  # staged
    (repo / ".env").write_text("API_KEY=SECRET\n")  # untracked
    run = tmp_path / "run"
    run.mkdir()
    path = write_code_diff(run, cwd=repo / ".")
    text = path.read_text()
    commit = _git(repo, "rev-parse", "HEAD").strip()
    assert commit in text.splitlines()[0]
    assert "PROMPT = 'new'" in text and "SCALE = 2" in text and "SECRET" not in text
    _git(repo, "reset", "-q", "--hard", commit)  # the commit alone, then the diff on it
    _git(repo, "apply", str(path))
    assert (repo / "agent.py").read_text() == "PROMPT = 'new'\n" and (repo / "reward.py").read_text() == "SCALE = 2\n"


def test_a_clean_tree_says_so_a_big_diff_is_capped_and_outside_git_nothing_is_written(repo, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert "none: the run's code is that commit" in write_code_diff(run, cwd=repo).read_text()
    (repo / "agent.py").write_text("x = 1\n" * 50_000)
    text = write_code_diff(run, cwd=repo, max_bytes=10_000).read_text()
    assert len(text) < 11_000 and "more bytes left out" in text.splitlines()[-1]
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    (run / "code.diff").unlink()
    assert write_code_diff(run, cwd=elsewhere) is None and not (run / "code.diff").exists()
