"""Configuration is read at the edges (issue 23 item 3): only the modules listed here import django.conf.settings.

Engines (search, admission, files, tokens, context, chunk ids, warm-up) take a
config object that an edge built (retrieval/config.py) and never read settings
themselves, so a test or an evaluation can pass another configuration instead
of patching settings, and a reader sees at the signature what a function
depends on. The scan counts imports anywhere in a module, also inside
functions. Migrations are not scanned (tests/test_import_graph.py skips them;
their own rule is tested beside the sources' migrations).
"""

import ast
from pathlib import Path

import pytest

from tests.test_import_graph import project_modules

pytestmark = pytest.mark.unit

_SHELL = "the shell: settings, processes and their launchers"
_MEASURE = "measurement (evaluation, benchmarks): run by management commands, an edge"
_ACCESS = (
    "the access layer's edge: auth classes, sign-in, refusals and rate limits run per request, before any "
    "engine, and read their limits (and the user model) there"
)

# module -> why it may read settings. Keep it short: a module that can take a config object should.
ALLOWED: dict[str, str] = {
    # One config builder per package that has engines.
    "kernel.config": "the kernel's config builder (the Redis URL and timeouts, the language model)",
    "sources.config": "the corpus's config builder (IngestSettings, embedding, indexing, jobs)",
    "retrieval.config": "the retrieval engine's config builder (SearchConfig, ContextConfig, FilesLimits, ...)",
    # Surfaces: they see requests and build the config they pass in.
    "surfaces.views": "surface: the search page (its page size and k cap are the page's own)",
    "surfaces.mcp_transport": "surface: the MCP transport checks Origin/Host and the body size like Django does",
    # Access: its request-time edges.
    "access.identity": _ACCESS,
    "access.auth": _ACCESS,
    "access.refusals": _ACCESS,
    "access.signin": _ACCESS,
    "access.oidc.config": "single sign-on's config builder (RAG_OIDC_*), read per sign-in",
    "access.models": "Django's swappable user model: a ForeignKey names it by settings.AUTH_USER_MODEL",
    "sources.models.memories": "Django's swappable user model: who approved a memory, by settings.AUTH_USER_MODEL",
    # The shell.
    "rag_site.beat": _SHELL,
    "rag_site.wsgi": _SHELL + " (builds the warm-up's config)",
    "rag_site.celery": _SHELL + " (Celery's log handlers take RAG_LOG_FORMAT)",
    "rag_site.management.commands.rag_run": _SHELL,
    "rag_site.backup.config": "the backup edge's config builder (the database, pg tools, backup directory)",
    "surfaces.csp": "surface: the Content-Security-Policy middleware",
    "surfaces.proxy": "surface: which proxy headers to trust, per request",
    "surfaces.metrics": "surface: /metrics checks its token and allowed networks per scrape",
    "surfaces.admin.skills": "surface: the admin form checks a skill against RAG_MAX_SKILL_BYTES",
    # The corpus's edge.
    "sources.tasks": "the Celery tasks: the worker's edge, where jobs build their configs (and the retry delay)",
    # Measurement.
    "measure.bench_accuracy": _MEASURE,
    "measure.bench_answers": _MEASURE,
    "measure.bench_bulk": _MEASURE,
    "measure.bench_corpus": _MEASURE,
    "measure.bench_freshness": _MEASURE,
    "measure.bench_grep": _MEASURE,
    "measure.bench_index": _MEASURE,
    "measure.bench_login_flood": _MEASURE,
    "measure.bench_search": _MEASURE,
    "measure.bench_searchable": _MEASURE,
    "measure.bench_workers": _MEASURE,
    "measure.evaluation": _MEASURE,
    "measure.management.commands.rag_eval": _MEASURE,
    "measure.management.commands.rag_bench": _MEASURE,
}


def imports_settings(path: Path) -> bool:
    """Whether the module imports django.conf.settings anywhere (module level or inside a function)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "django.conf":
            if any(alias.name == "settings" for alias in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.module == "django":
            if any(alias.name == "conf" for alias in node.names):
                return True  # `from django import conf`: conf.settings
        elif isinstance(node, ast.Import) and any(alias.name == "django.conf" for alias in node.names):
            return True  # `import django.conf`: django.conf.settings
    return False


def settings_importers() -> set[str]:
    return {name for name, path in project_modules().items() if imports_settings(path)}


def test_the_scan_sees_every_way_of_importing_settings(tmp_path):
    forms = {
        "top": "from django.conf import settings\n",
        "renamed": "from django.conf import settings as conf\n",
        "late": "def f():\n    from django.conf import settings\n    return settings.DEBUG\n",
        "module": "from django import conf\n",
        "dotted": "import django.conf\n",
    }
    for name, text in forms.items():
        (tmp_path / f"{name}.py").write_text(text)
        assert imports_settings(tmp_path / f"{name}.py"), name
    (tmp_path / "clean.py").write_text("from django.db import connection\nfrom retrieval.config import SearchConfig\n")
    assert not imports_settings(tmp_path / "clean.py")


def test_only_the_listed_modules_import_settings():
    found = settings_importers()
    assert "retrieval.config" in found  # the scan works: the builder reads settings
    added = sorted(found - set(ALLOWED))
    gone = sorted(set(ALLOWED) - found)
    assert not added, (
        "these modules import django.conf.settings but are not edges or config builders: "
        f"{', '.join(added)}. Take a config object built at the edge (retrieval/config.py) instead; "
        "if the module really is an edge (a router, a page view, a task, the shell), add it to ALLOWED with the reason"
    )
    assert not gone, f"these modules no longer import django.conf.settings: {', '.join(gone)}; remove them from ALLOWED"


def test_no_engine_module_of_retrieval_reads_settings():
    engine = {
        "retrieval.search",
        "retrieval.admission",
        "retrieval.files",
        "retrieval.tokens",
        "retrieval.context",
        "retrieval.chunk_ids",
        "retrieval.warmup",
        "retrieval.schemas",
        "retrieval.answers",
        "retrieval.lexical",
        "retrieval.vector",
        "retrieval.session",
        "retrieval.rerank",
        "retrieval.rerank_llm",
    }
    assert engine <= set(project_modules())
    assert not engine & settings_importers()


def test_the_builders_read_settings_when_called_not_at_import(settings):
    from retrieval.config import AnswerConfig, ContextConfig, FilesLimits, SearchConfig, WarmUpConfig

    settings.RAG_READ_MAX_LINES, settings.RAG_GREP_SCAN_FILES = 7, 5
    settings.RAG_SEARCH_LONG_QUERY_WORDS, settings.RAG_QUERY_EMBEDDING_CACHE = 9, 3
    settings.RAG_CONTEXT_TOKENIZER, settings.RAG_EMBEDDING_MODEL = "cl100k_base", "another-model"
    assert (FilesLimits.from_settings().read_max_lines, FilesLimits.from_settings().grep_scan_files) == (7, 5)
    search = SearchConfig.from_settings()
    assert (search.admission.long_query_words, search.query_embedding_cache) == (9, 3)
    assert ContextConfig.from_settings().tokenizer == WarmUpConfig.from_settings().tokenizer == "cl100k_base"
    assert WarmUpConfig.from_settings().default_model == "another-model"
    settings.SECRET_KEY = "a secret of this test"
    answer = AnswerConfig.from_settings()
    assert answer.chunk_id_secret == "a secret of this test" and "a secret of this test" not in repr(answer)
