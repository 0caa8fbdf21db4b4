"""A local bare git repository made with the git CLI, and a clone to commit and push from (tests and the bench)."""

import os
import subprocess
from pathlib import Path

_ENV = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.org",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.org",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


class Origin:
    """``directory/origin.git`` (bare, the remote a git root clones by file:// URL) and ``directory/work``."""

    def __init__(self, directory: Path, *, branch: str = "main") -> None:
        self.bare = directory / "origin.git"
        self.work = directory / "work"
        self.branch = branch
        directory.mkdir(parents=True, exist_ok=True)
        self._git(directory, "init", "--quiet", "--bare", "-b", branch, str(self.bare))
        self._git(directory, "init", "--quiet", "-b", branch, str(self.work))

    @property
    def url(self) -> str:
        return f"file://{self.bare}"

    def git(self, *args: str) -> str:
        return self._git(self.work, *args)

    @staticmethod
    def _git(cwd: Path, *args: str) -> str:
        done = subprocess.run(
            ["git", *args], cwd=cwd, env={**os.environ, **_ENV}, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def commit(
        self,
        message: str,
        files: dict[str, str] | None = None,
        *,
        delete: tuple[str, ...] = (),
        rename: dict[str, str] | None = None,
    ) -> str:
        """Write ``files``, delete and rename (old -> new), commit everything; returns the commit id."""
        for path, text in (files or {}).items():
            target = self.work / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        for path in delete:
            self.git("rm", "--quiet", path)
        for old, new in (rename or {}).items():
            (self.work / new).parent.mkdir(parents=True, exist_ok=True)
            self.git("mv", old, new)
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def push(self, *, force: bool = False, branch: str | None = None) -> None:
        branch = branch or self.branch
        self.git("push", "--quiet", *(["--force"] if force else []), str(self.bare), f"HEAD:refs/heads/{branch}")
