"""docs/architecture.md names every module of the packages it describes, so the map cannot drift from the code."""

import fnmatch
import re
from pathlib import Path

import pytest

from tests.test_import_graph import ORDER

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
# Django loads migrations by name and each app's apps.py is its one-line declaration: neither is a module to map.
UNMAPPED = {"__init__.py", "apps.py"}


def package_bullet(doc: str, package: str) -> str:
    """The package's entry under "The packages": from its "- **`package/`**" to the next entry or paragraph."""
    found = re.search(rf"^- \*\*`{package}/`\*\*.*?(?=^- \*\*`|^\S|\Z)", doc, re.MULTILINE | re.DOTALL)
    assert found, f"docs/architecture.md has no entry for {package}/"
    return found.group(0)


def modules(package: str) -> list[str]:
    """Every module of ``package``, as a path inside it (``routes/memories.py``)."""
    return sorted(
        path.relative_to(ROOT / package).as_posix()
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and path.name not in UNMAPPED
    )


def unnamed(module_paths: list[str], bullet: str) -> list[str]:
    """The modules the entry does not name. A name is a code span: the module's path inside the package
    (``routes/sources.py``) or its end (``commands/rag_run.py``), its folder (``chunking/``), a pattern
    (``bench_*.py``), or its bare file name when no other module of the package has it."""
    names = re.findall(r"`([^`\s]+)`", bullet)
    base_counts: dict[str, int] = {}
    for path in module_paths:
        base_counts[path.rsplit("/", 1)[-1]] = base_counts.get(path.rsplit("/", 1)[-1], 0) + 1

    def named(path: str) -> bool:
        base = path.rsplit("/", 1)[-1]
        for name in names:
            if name.endswith("/"):
                if f"/{name}" in f"/{path}":
                    return True
            elif "*" in name:
                if fnmatch.fnmatch(path, name) or fnmatch.fnmatch(base, name):
                    return True
            elif path == name or ("/" in name and f"/{path}".endswith(f"/{name}")):
                return True
            elif name == base and base_counts[base] == 1:
                return True
        return False

    return [path for path in module_paths if not named(path)]


def test_the_rule_sees_a_module_the_entry_leaves_out():
    paths = ["admin/scoping.py", "api.py", "routes/documents.py", "routes/memories.py", "routes/sources.py"]
    paths.append("sources.py")
    bullet = "- **`surfaces/`**: `api.py`, its routers (`routes/memories.py`), the console (`admin/`), `sources.py`"
    # A bare name covers only the package's one file of that name: `sources.py` is the top-level one, not the router.
    assert unnamed(paths, bullet) == ["routes/documents.py", "routes/sources.py"]
    assert unnamed(["bench_load.py", "bench_search.py"], "(`bench_*.py`: speed)") == []


def test_every_module_is_named_in_its_packages_entry():
    doc = ARCHITECTURE.read_text(encoding="utf-8")
    missing = [
        f"{package}/{path}" for package in ORDER for path in unnamed(modules(package), package_bullet(doc, package))
    ]
    assert not missing, "docs/architecture.md does not name (see its package's entry):\n  " + "\n  ".join(missing)
