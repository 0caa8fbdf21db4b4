"""docs/configuration.md's settings reference and .env.example, generated from rag_site/settings_registry.py.

``python -m rag_site.settings_reference`` (``make settings-docs``) rewrites both;
``--check`` only says which is stale. Needs no database and no environment:
it imports the registry, never the settings.
"""

import re
import sys
import textwrap
from pathlib import Path

from rag_site.settings_registry import BASE_DIR, DECLARED, Setting, Topic

CONFIGURATION_DOC = BASE_DIR / "docs" / "configuration.md"
ENV_EXAMPLE = BASE_DIR / ".env.example"
COMMAND = "make settings-docs"

BEGIN = (
    f"<!-- BEGIN settings reference: generated from rag_site/settings_registry.py by `{COMMAND}`; "
    "edit the registry, not this part -->"
)
END = "<!-- END settings reference -->"

# Headings keep the anchors other pages link to (#search, #access-and-limits, #embedding-and-indexing).
TITLES = {
    Topic.BASE: "Django core: database, secret, HTTPS and headers",
    Topic.RUNTIME: "Redis, Celery and the processes of `make run`",
    Topic.INDEXING: "Embedding and indexing",
    Topic.SEARCH: "Search",
    Topic.ACCESS: "Access and limits",
    Topic.LLM: "Language model (optional)",
    Topic.OBSERVABILITY: "Metrics and logs",
    Topic.COMPOSE: "docker-compose",
}
INTROS = {
    Topic.SEARCH: "The channels, fusion and rerank, the query models, and the limits of `/api/v1/context`, "
    "`/api/v1/read` and `/api/v1/grep`.",
    Topic.LLM: "API embeddings, contextual retrieval and rerank with the language model; how the client "
    "retries and falls back is in [How the language model is used](#how-the-language-model-is-used).",
    Topic.COMPOSE: "Read by `docker-compose.yml` only, from a `.env` file next to it (see "
    "[Deployment](deployment.md#docker-compose)); compose refuses to start without `POSTGRES_PASSWORD`, "
    "`RAG_DOMAIN` and `SECRET_KEY`.",
}

ENV_EXAMPLE_HEADER = """\
# rag-site configuration, generated from rag_site/settings_registry.py by `make settings-docs` (edit the
# registry, not this file). Every variable is optional for `make run`; copy to .env for docker-compose,
# which requires SECRET_KEY, POSTGRES_PASSWORD and RAG_DOMAIN (last section). Defaults shown.
# Any variable can also be read from a file: NAME_FILE=/run/secrets/name.
"""


def _by_topic() -> dict[Topic, list[Setting]]:
    grouped: dict[Topic, list[Setting]] = {topic: [] for topic in Topic}
    for setting in DECLARED:
        grouped[setting.topic].append(setting)
    return grouped


def _read_by(topic: Topic) -> str:
    if topic == Topic.COMPOSE:
        return "rag-site itself reads none of these"
    return f"read by `rag_site/settings/{topic}.py`"


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def _default_cell(setting: Setting) -> str:
    if setting.shown:
        return setting.shown
    text = setting.default_text()
    return f"`{text}`" if text else "empty"


def reference_markdown() -> str:
    """The generated part of docs/configuration.md, markers included."""
    grouped = _by_topic()
    lines = [BEGIN, "", "The settings by topic:", ""]
    lines += [f"- [{TITLES[topic]}](#{_slug(TITLES[topic])})" for topic in Topic]
    for topic in Topic:
        lines += ["", f"## {TITLES[topic]}", ""]
        intro = INTROS.get(topic, "")
        lines += [" ".join(filter(None, [intro, _sentence(_read_by(topic))])), ""]
        lines += ["| Variable | Default | Values | Meaning |", "|---|---|---|---|"]
        for setting in grouped[topic]:
            cells = [f"`{setting.name}`", _default_cell(setting), setting.values_text(), setting.doc]
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    lines += ["", END]
    return "\n".join(lines) + "\n"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading (as tests/test_docs.py computes it)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def configuration_doc(current: str) -> str:
    """``current`` with the text between the markers replaced by the generated reference."""
    start, end = current.find(BEGIN), current.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{CONFIGURATION_DOC.name} lacks the markers {BEGIN!r} ... {END!r}: put them back")
    return current[:start] + reference_markdown() + current[end + len(END) + 1 :]


def _plain(doc: str) -> str:
    """A doc line for a shell-style comment: links as their text."""
    return re.sub(r"\[([^\]]+)\]\([^)]+\)", r"\1", doc)


def env_example() -> str:
    """.env.example: each variable's doc as a comment, then the variable at its default, commented out."""
    parts = [ENV_EXAMPLE_HEADER]
    for topic, settings in _by_topic().items():
        title = TITLES[topic].replace("`", "")
        parts.append(f"# --- {title} ({_read_by(topic).replace('`', '')}) ---\n")
        for setting in settings:
            doc = textwrap.fill(
                _plain(setting.doc),
                width=118,
                initial_indent="# ",
                subsequent_indent="# ",
                break_long_words=False,
                break_on_hyphens=False,
            )
            value = setting.example if setting.example is not None else setting.default_text()
            parts.append(f"{doc}\n# {setting.name}={value}\n")
    return "\n".join(parts)


def generated() -> dict[Path, str]:
    """Each generated file and the text it should have."""
    return {
        CONFIGURATION_DOC: configuration_doc(CONFIGURATION_DOC.read_text(encoding="utf-8")),
        ENV_EXAMPLE: env_example(),
    }


def stale() -> list[Path]:
    return [path for path, text in generated().items() if path.read_text(encoding="utf-8") != text]


def _shown(path: Path) -> str:
    return str(path.relative_to(BASE_DIR)) if path.is_relative_to(BASE_DIR) else str(path)


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python -m rag_site.settings_reference [--check]", file=sys.stderr)
        return 2
    if argv == ["--check"]:
        outdated = stale()
        for path in outdated:
            print(f"{_shown(path)} differs from the registry: run `{COMMAND}`", file=sys.stderr)
        return 1 if outdated else 0
    for path, text in generated().items():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {_shown(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
