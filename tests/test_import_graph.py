"""The package order (docs/architecture.md) and no import cycle among the project's own modules.

The graph counts every import, also those inside functions: an import put
off until call time still ties the two modules together, and it is how a
cycle, or a package reaching above itself, usually hides.
"""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
# The package order, lowest first: a package imports only the packages before it (and itself).
ORDER = ("kernel", "sources", "access", "retrieval", "surfaces", "rag_site", "measure")
PACKAGES = ORDER
# The product; measurement (evaluation, benchmarks) uses it and is never used by it.
PRODUCT = ORDER[:-1]


def project_modules() -> dict[str, Path]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "migrations" in parts:
                continue  # Django loads migrations by name, never by import from the app
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules[name] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports, wherever the import statement stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]  # a name inside a module: the module
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_chain(graph: dict[str, set[str]], start: str, target_package: str) -> list[str] | None:
    """A chain of imports from ``start`` into ``target_package`` (directly or through other modules), or None."""
    parent: dict[str, str | None] = {start: None}
    queue = [start]
    while queue:
        node = queue.pop(0)
        if node == target_package or node.startswith(target_package + "."):
            chain = [node]
            while parent[chain[-1]] is not None:
                chain.append(parent[chain[-1]])
            return chain[::-1]
        for other in sorted(graph.get(node, ())):
            if other not in parent:
                parent[other] = node
                queue.append(other)
    return None


def against_the_order(graph: dict[str, set[str]], order: tuple[str, ...] = ORDER) -> list[str]:
    """Every import of a module from a package later in ``order`` than its own ("a -> b")."""
    rank = {package: position for position, package in enumerate(order)}
    return sorted(
        f"{name} -> {target}"
        for name, targets in graph.items()
        for target in targets
        if rank[target.split(".")[0]] > rank[name.split(".")[0]]
    )


def test_cycle_finder_sees_a_cycle_through_a_function_level_import(tmp_path):
    modules = {"a": tmp_path / "a.py", "b": tmp_path / "b.py", "c": tmp_path / "c.py"}
    modules["a"].write_text("from b import thing\n")
    modules["b"].write_text("def later():\n    import c\n")
    modules["c"].write_text("import a\n")
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert graph == {"a": {"b"}, "b": {"c"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_import_chain_follows_imports_through_other_modules():
    graph = {
        "app.views": {"app.search"},
        "app.search": {"bench.load"},
        "bench.load": {"app.search"},
        "app.other": set(),
    }
    assert import_chain(graph, "app.views", "bench") == ["app.views", "app.search", "bench.load"]
    assert import_chain(graph, "app.other", "bench") is None


def test_project_has_no_import_cycle():
    modules = project_modules()
    assert "sources.roots" in modules and "retrieval.search" in modules
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    found = cycles(graph)
    described = ["\n  ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c) for c in found]
    assert not found, "import cycles:\n  " + "\n\n  ".join(described)


def test_the_product_never_imports_measurement():
    modules = project_modules()
    assert "measure.evaluation" in modules and "rag_site.management.commands.rag_run" in modules
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    product = sorted(name for name in modules if name.split(".")[0] in PRODUCT)
    chains = [chain for name in product if (chain := import_chain(graph, name, "measure"))]
    assert not chains, "the product imports measure:\n  " + "\n  ".join(" -> ".join(chain) for chain in chains)


def external_imports(path: Path) -> set[str]:
    """The top-level names of every absolute import in the file, wherever the statement stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


# The engine knows nothing of HTTP (docs/architecture.md): no ninja, no django.http. Its wire schemas are the one
# exception left, because the engine's answer functions take and return them (grep, read, context, answers,
# memories): moving them to surfaces/ needs the engine to return its own types first (issue 43, item 7a). The set
# only shrinks.
HTTP_PACKAGES = ("ninja", "django.http")
ENGINE_MODULES_ON_NINJA = {"retrieval.schemas", "retrieval.memory_schemas"}


def test_the_http_check_sees_an_import_inside_a_function(tmp_path):
    (tmp_path / "shapes.py").write_text("import json\n\ndef later():\n    from ninja.schema import Schema\n")
    assert external_imports(tmp_path / "shapes.py") == {"json", "ninja.schema"}


def test_the_engine_imports_nothing_of_http_but_its_wire_schemas_ninja():
    on_http = {
        name: sorted(found)
        for name, path in project_modules().items()
        if name.split(".")[0] == "retrieval"
        and (
            found := {
                imported
                for imported in external_imports(path)
                if any(imported == package or imported.startswith(package + ".") for package in HTTP_PACKAGES)
            }
        )
    }
    assert set(on_http) <= ENGINE_MODULES_ON_NINJA, on_http  # a new engine module on ninja or django.http fails
    assert all(imported.split(".")[0] == "ninja" for found in on_http.values() for imported in found), on_http


def test_only_the_ninja_api_imports_the_routers():
    # The routers are HTTP edges: the MCP server and everything else share the answer functions, not the endpoints.
    # Every module in surfaces/routes/ is a router, found here, not listed: a new one is covered when it is added.
    modules = project_modules()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    routers = sorted(name for name in modules if name.startswith("surfaces.routes."))
    assert len(routers) >= 5 and "surfaces.routes.retrieval" in routers
    edges = {*routers, "surfaces.api"}
    importers = {name: sorted(graph[name] & edges) for name in graph if graph[name] & edges}
    assert importers == {"surfaces.api": routers, "rag_site.urls": ["surfaces.api"]}


def test_order_checker_sees_an_import_of_a_later_package_inside_a_function(tmp_path):
    modules = {
        "kernel.errors": tmp_path / "errors.py",
        "sources.ingest": tmp_path / "ingest.py",
        "retrieval.search": tmp_path / "search.py",
    }
    modules["kernel.errors"].write_text("import json\n")
    modules["sources.ingest"].write_text(
        "from kernel.errors import Oops\n\ndef later():\n    from retrieval.search import go\n"
    )
    modules["retrieval.search"].write_text("from sources.ingest import later\n")
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert against_the_order(graph) == ["sources.ingest -> retrieval.search"]
    graph["sources.ingest"].discard("retrieval.search")
    assert against_the_order(graph) == []


def test_every_import_follows_the_package_order():
    modules = project_modules()
    assert {name.split(".")[0] for name in modules} == set(ORDER)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    found = against_the_order(graph)
    assert not found, (
        "imports against the package order " + " < ".join(ORDER) + " (docs/architecture.md):\n  " + "\n  ".join(found)
    )
