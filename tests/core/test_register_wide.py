"""A registered directory takes every session under it: `fleet register --any-dir` and
`Fleet.register` refuse the filesystem root, the home directory and a directory holding other
workers' worktrees, in one line, and write nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fleet import Fleet
from fleet._cli import main
from fleet._errors import Refused
from fleet._journal import worktree_owners

from ..conftest import git_worktree


def _register(capsys: pytest.CaptureFixture[str], worker: str, path: Path | str
              ) -> tuple[int, str]:
    code = main(["register", worker, "--worktree", str(path), "--any-dir"])
    _, err = capsys.readouterr()
    return code, err


def test_any_dir_refuses_the_root_the_home_and_a_parent_of_worktrees(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    inner = git_worktree(tmp_path / "repos" / "inner")
    assert _register(capsys, "inner", inner) == (0, "")
    user_home = Path(os.environ["HOME"])
    for path, why in ((Path("/"), "the filesystem root"),
                      (user_home, "the home directory"),
                      (user_home / ".." / user_home.name, "the home directory"),
                      (tmp_path / "repos", "contains the worktree"),
                      (tmp_path, "contains the worktree")):
        code, err = _register(capsys, "wide", path)
        assert code == 4, (path, err)
        assert why in err and err.count("\n") == 1, err
    assert not (home / "workers" / "wide").exists()
    assert worktree_owners(home) == {str(inner.resolve()): "inner"}
    # Beside the worktrees, or inside one's own, is fine.
    beside = tmp_path / "repos" / "beside"
    beside.mkdir()
    assert _register(capsys, "beside", beside) == (0, "")


def test_the_library_refuses_the_same(home: Path, tmp_path: Path) -> None:
    inner = git_worktree(tmp_path / "a" / "inner")
    with Fleet(home) as fleet:
        fleet.register("inner", worktree=inner)
        for path in (Path("/"), Path(os.environ["HOME"]), tmp_path / "a"):
            with pytest.raises(Refused):
                fleet.register("wide", worktree=path)
        # The worker's own worktree again, or a directory inside a worktree, stays allowed.
        fleet.register("inner", worktree=inner)
        assert fleet.workers() == ["inner"]
