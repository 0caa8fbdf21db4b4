"""The pre-commit hooks run what `make lint` runs, docs/development.md says what it checks, and the linters' caches
stay out of git."""

import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def make_lint_commands() -> list[list[str]]:
    """The Makefile's lint recipe, one argument list per line, its variables expanded as make would."""
    makefile = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    variables = dict(re.findall(r"^([A-Z_]+) :?= ?(.*)$", makefile, re.MULTILINE))
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.MULTILINE)
    assert recipe, "the Makefile has no lint recipe"

    def expand(line: str) -> str:
        return re.sub(r"\$\(([A-Z_]+)\)", lambda name: expand(variables[name.group(1)]), line)

    return [shlex.split(expand(line.strip())) for line in recipe.group(1).splitlines()]


def hook_commands() -> list[list[str]]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [hook for repo in config["repos"] for hook in repo["hooks"]]
    assert all(repo["repo"] == "local" for repo in config["repos"]), "a hook repository would be downloaded"
    assert all(hook["language"] == "system" and hook["pass_filenames"] is False for hook in hooks)
    commands = [shlex.split(hook["entry"]) for hook in hooks]
    return [command[1:] if command[0] == "env" else command for command in commands]


def test_the_hooks_run_what_make_lint_runs():
    assert make_lint_commands() == hook_commands()
    assert len(hook_commands()) == 3 and all(".venv/bin/" in " ".join(command) for command in hook_commands())


@pytest.mark.skipif(not shutil.which("git") or not (ROOT / ".git").exists(), reason="not a git checkout")
def test_the_linters_caches_are_ignored():
    paths = [".mypy_cache/3.11/cache.db", ".ruff_cache/0.17.0/cache", ".pytest_cache/v/cache"]
    ignored = subprocess.run(["git", "check-ignore", *paths], cwd=ROOT, capture_output=True, text=True)
    assert ignored.stdout.split() == paths


def test_the_development_guide_names_every_package_mypy_checks():
    checked = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    guide = " ".join((ROOT / "docs" / "development.md").read_text().split())
    sentence = re.search(r"mypy checks the (\w+) packages, (.+?)\)", guide)
    assert sentence, "docs/development.md no longer says which packages mypy checks"
    named = re.findall(r"`(\w+)`", sentence.group(2))
    assert sorted(named) == sorted(checked)
    assert sentence.group(1) == {4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}.get(len(checked))
