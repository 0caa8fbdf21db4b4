"""Migrations never import live application code (issue 23 item 3).

A migration is history: it must do to an old database tomorrow what it did
the day it was written. Importing a model, a constant or a function of the
project ties it to whatever that code becomes, so a migration copies what it
needs (frozen) and may import only Django, the standard library and the helper
modules beside it in its own migrations package.
"""

import ast
from pathlib import Path

import pytest

from tests.test_import_graph import ORDER, ROOT

pytestmark = pytest.mark.unit

# Every top-level package of the project, including those the re-layout adds.
PROJECT = ORDER


def migration_files(root: Path = ROOT) -> list[Path]:
    return sorted(
        path
        for package in PROJECT
        if (root / package).is_dir()
        for path in (root / package).rglob("migrations/*.py")
        if path.name != "__init__.py"
    )


def forbidden_imports(path: Path, root: Path = ROOT) -> list[str]:
    """The project modules ``path`` imports (wherever the statement stands) outside its own migrations package."""
    package = ".".join(path.relative_to(root).parent.parts)  # e.g. retrieval.migrations
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                targets = [".".join([*anchor, node.module] if node.module else anchor)]
            else:
                targets = [node.module or ""]
        else:
            continue
        for target in targets:
            own = target == package or target.startswith(package + ".")
            if target.split(".")[0] in PROJECT and not own:
                found.append(f"{path.relative_to(root)}:{node.lineno} imports {target}")
    return found


def test_the_check_sees_live_code_imported_by_a_migration_and_allows_its_sibling_helpers(tmp_path):
    migrations = tmp_path / "sources" / "migrations"
    migrations.mkdir(parents=True)
    (migrations / "__init__.py").write_text("")
    (migrations / "_helpers.py").write_text("SQL = ''\n")
    (migrations / "0001_ok.py").write_text(
        "from django.db import migrations\nfrom sources.migrations._helpers import SQL\nfrom ._helpers import SQL\n"
    )
    (migrations / "0002_bad.py").write_text(
        "import retrieval.models.lexical\n\ndef fill(apps, schema_editor):\n    from sources import ingest\n"
    )
    files = migration_files(tmp_path)
    assert [p.name for p in files] == ["0001_ok.py", "0002_bad.py", "_helpers.py"]
    assert forbidden_imports(files[0], tmp_path) == []
    assert forbidden_imports(files[1], tmp_path) == [
        "sources/migrations/0002_bad.py:1 imports retrieval.models.lexical",
        "sources/migrations/0002_bad.py:4 imports sources",
    ]


def test_no_migration_imports_live_application_code():
    files = migration_files()
    assert len(files) > 10  # the check reads the real migrations, not an empty glob
    assert [finding for path in files for finding in forbidden_imports(path)] == []


def test_the_frozen_copies_in_0007_are_the_old_formula_0021_renews():
    """0021 recognises what 0007 (and the code until 0021) stored: both copies of the global-version formula agree."""
    import importlib

    from sources.embedding import ModelSpec
    from sources.ingest import content_hash

    frozen = importlib.import_module("sources.migrations.0007_fingerprints")
    renewing = importlib.import_module("sources.migrations.0021_chunker_versions")
    spec = ModelSpec("local", "some/model", 384, True)
    assert frozen._identity(spec) == renewing._identity(spec) == spec.identity
    assert frozen.content_hash("x\udcff") == content_hash("x\udcff")
    assert frozen.CHUNKING_VERSION == renewing.OLD_CHUNKING_VERSION
    assert frozen.fingerprint(content="abc", model=spec.identity) == renewing.old_fingerprint(
        content="abc", model=spec.identity
    )


def test_the_frozen_copies_in_0021_compute_what_the_live_chunkers_and_ingest_code_compute(settings):
    import importlib

    from sources.chunking import STRATEGIES, chunker_identity, strategy_identity
    from sources.chunking.treesitter import LANGUAGES
    from sources.config import ingest_settings
    from sources.embedding import ModelSpec
    from sources.extract import EXTRACTORS
    from sources.ingest import fingerprint

    frozen = importlib.import_module("sources.migrations.0021_chunker_versions")
    names = {"window", "markdown", "code-python", "code", "structured", "notebook", "document", "skill", "whole"}
    names |= {f"code-{grammar}" for grammar in frozen.GRAMMARS.values()}
    if {name: s.version for name, s in STRATEGIES.items()} != dict.fromkeys(names, 1):
        pytest.skip("the chunkers have moved on since 0021: the copy stays as it was, the live code does not")
    assert frozen.GRAMMARS == LANGUAGES
    paths = ["a.md", "a.MDX", "a.py", "a.pyi", "a.ipynb", "a.json", "a.yml", "a.toml", "a.txt", "Makefile", "a.rst"]
    paths += [f"a{suffix}" for suffix in LANGUAGES]
    assert {path: frozen.chunker_identity(path) for path in paths} == {path: chunker_identity(path) for path in paths}
    assert frozen.chunker_identity("a.pdf", document=True) == chunker_identity("a.pdf", document=True)
    assert (frozen.SKILL, frozen.WHOLE) == (strategy_identity("skill"), strategy_identity("whole"))
    for suffix, extractor in EXTRACTORS.items():
        if frozen.EXTRACTORS[suffix] == (extractor.kind, extractor.library, extractor.revision, extractor.also):
            assert frozen.extractor_identity(f"a{suffix}") == extractor.identity
    spec = ModelSpec("local", "some/model", 384, True)
    settings.RAG_LLM_BASE_URL, settings.RAG_CONTEXTUAL_RETRIEVAL, settings.RAG_CONTEXTUAL_MODEL = (
        "http://x/v1",
        True,
        "m",
    )
    config = ingest_settings()
    assert config.contextual and frozen._contextual() == config.contextual
    for chunker, extractor in [
        (chunker_identity("a.md"), ""),
        (chunker_identity("a.pdf", document=True), EXTRACTORS[".pdf"].identity),
        (strategy_identity("skill"), ""),
        (strategy_identity("whole"), ""),
    ]:
        assert frozen.new_fingerprint(
            content="abc", model=spec.identity, chunker=chunker, extractor=extractor
        ) == fingerprint(content="abc", model=spec.identity, config=config, chunker=chunker, extractor=extractor)
