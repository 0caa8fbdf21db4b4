"""POST /api/v1/context on the real servers: demo skills and an indexed tree, the real embedding model."""

import json
import os

import pytest

from rag_site.demo import demo_skills_load
from retrieval.tokens import token_count
from sources import services, tools
from sources.models import Chunk, Skill, Tool, WorkspaceRoot
from tests.conftest import index_root

pytestmark = pytest.mark.django_db

QUERY = "retry when indexing a skill fails"
# Three sections that each say "retry": three adjacent chunks of one file.
RETRIES_MD = "".join(
    f"# Retry step {n}\n\n"
    f"When indexing a skill fails, retry step {n}: check the worker and the skill body {'again ' * 40}.\n\n"
    for n in range(1, 4)
)
INDEXER_PY = '''"""Indexing retries."""


def skill_index_retry(skill, attempts):
    """Retry indexing a skill that failed: wait, then embed its chunks again."""
    for attempt in range(attempts):
        if skill.index():
            return True
        skill.wait(seconds=2 ** attempt)
    skill.mark_failed("indexing failed after every retry")
    return False
'''


@pytest.fixture
def corpus(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_CHUNK_MAX_CHARS = 400  # the retries guide becomes several adjacent chunks
    for slug in demo_skills_load():
        services.skill_index(skill_id=Skill.objects.get(slug=slug).pk)
    tree = tmp_path / "shop"
    tree.mkdir()
    (tree / "indexer.py").write_text(INDEXER_PY)
    (tree / "retries.md").write_text(RETRIES_MD)
    (tree / "shipping.py").write_text("def parcel_ship(parcel):\n    return parcel.label()\n")
    root = WorkspaceRoot.objects.create(name="shop", path=str(tree))
    index_root(root)
    tool = Tool.objects.create(
        name="indexing_retry",
        description="Retry indexing a skill that failed.",
        parameters={"type": "object", "properties": {"slug": {"type": "string"}}},
    )
    tools.tool_index(tool_id=tool.pk)
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    return tree


def context(client, **payload):
    response = client.post(
        "/api/v1/context", data=json.dumps({"query": QUERY, **payload}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def files_in_text_order(answer) -> list[str]:
    return list(dict.fromkeys(part["path"] for part in answer["parts"] if part["kind"] == "file"))


def test_context_puts_the_best_file_first_and_the_second_best_last(corpus, key_client):
    answer = context(key_client, budget_tokens=4000)
    searched = key_client.post(
        "/api/v1/search",
        data=json.dumps({"query": QUERY, "sources": ["file"], "group": True, "k": 10}),
        content_type="application/json",
    ).json()["hits"]
    ranked_files = [hit["path"] for hit in searched]
    assert len(ranked_files) == len(set(ranked_files)) >= 2  # grouped per file, not per root
    order = files_in_text_order(answer)
    assert len(order) >= 2 and set(order) <= set(ranked_files)
    assert order[0] == ranked_files[0] and order[-1] == ranked_files[1]
    # Skills first, as an index: each skill once, with its citation and why.
    skills = [part for part in answer["parts"] if part["kind"] == "skill"]
    assert skills and answer["text"].startswith("## Skills")
    assert len({part["slug"] for part in skills}) == len(skills)
    assert all(
        part["citation"].startswith(f"skill:{part['slug']}:") and part["citation"] in answer["text"] for part in skills
    )
    # Every file block carries its citation and the exact indexed lines.
    for part in answer["parts"]:
        if part["kind"] == "file":
            assert (
                f"[{part['citation']}]" in answer["text"]
                and part["content"] in answer["text"]
                and part["root"] == "shop"
            )
            lines = (corpus / part["path"]).read_text().split("\n")[part["start_line"] - 1 : part["end_line"]]
            assert part["content"] == "\n".join(lines)


def test_adjacent_chunks_of_one_file_are_merged_into_one_range(corpus, key_client):
    chunks = list(Chunk.objects.filter(path="retries.md").order_by("start_line").values_list("start_line", "end_line"))
    assert len(chunks) >= 3, "the guide must be several chunks for this test to mean anything"
    answer = context(key_client, budget_tokens=4000, k={"skill": 0, "file": 20, "tool": 0})
    ranges = [(p["start_line"], p["end_line"]) for p in answer["parts"] if p["path"] == "retries.md"]
    assert ranges == [(chunks[0][0], chunks[-1][1])]
    assert answer["text"].count("### retries.md (markdown, root shop)") == 1


def test_the_text_stays_within_the_budget_counted_by_the_same_tokenizer(corpus, key_client, settings):
    for budget in (200, 600, 4000):
        answer = context(key_client, budget_tokens=budget)
        assert answer["tokenizer"] == settings.RAG_CONTEXT_TOKENIZER
        assert answer["tokens_used"] == token_count(answer["text"], encoding=answer["tokenizer"]) <= budget
        assert sum(part["tokens"] for part in answer["parts"]) <= answer["tokens_used"]
    small = context(key_client, budget_tokens=200)
    assert small["dropped"] and all(
        "over budget" in d["reason"] or "below the relevance floor" in d["reason"] for d in small["dropped"]
    )
    assert any("over budget" in d["reason"] for d in small["dropped"])


def test_the_best_skill_gives_its_section_inline_and_far_skills_stay_out(corpus, key_client, settings):
    """A bot that cannot call get_skill still reads the curated answer; a skill that shares a word with the query
    but not its meaning is left out, and said so."""
    answer = context(key_client, budget_tokens=4000)
    best = next(part for part in answer["parts"] if part["kind"] == "skill")
    assert best["slug"] == "indexing" and "When indexing fails" in best["section"]
    assert "The chunks from the last\nsuccessful run stay searchable" in best["content"]
    assert best["content"] in answer["text"]
    far = [d for d in answer["dropped"] if d["kind"] == "skill"]
    assert far and all("below the relevance floor" in d["reason"] for d in far)
    assert not {d["citation"] for d in far} & {part["citation"] for part in answer["parts"]}
    settings.RAG_CONTEXT_SKILL_SHARE = 0.0
    pointers = context(key_client, budget_tokens=4000)
    line = next(part for part in pointers["parts"] if part["kind"] == "skill")["content"]
    assert line.startswith("- How indexing works (`indexing`)") and "successful run" not in line


def test_a_file_edited_after_indexing_is_flagged_stale(corpus, key_client):
    before = context(key_client, budget_tokens=4000)
    indexer = [part for part in before["parts"] if part["path"] == "indexer.py"]
    # One range: its two chunks sit a blank line apart, filled in from the file while it is the one indexed.
    assert len(indexer) == 1 and not indexer[0]["stale"] and indexer[0]["indexed_at"] and indexer[0]["content_hash"]
    path = corpus / "indexer.py"
    path.write_text(INDEXER_PY + "\n# edited by hand\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    after = context(key_client, budget_tokens=4000)
    flags = [part["stale"] for part in after["parts"] if part["path"] == "indexer.py"]
    assert len(flags) == 2 and all(flags)  # no longer merged either: the lines between may have changed
    others = [part["stale"] for part in after["parts"] if part["path"] == "retries.md"]
    assert others and not any(others)


def test_tools_come_apart_from_the_text_as_function_schemas(corpus, key_client):
    answer = context(key_client, budget_tokens=4000)
    names = [tool["function"]["name"] for tool in answer["tools"]]
    assert "indexing_retry" in names and all(tool["type"] == "function" for tool in answer["tools"])
    assert "indexing_retry" not in answer["text"] and answer["tools_tokens"] > 0
    for leave_out in ({"sources": ["skill", "file"]}, {"include_tools": False}, {"k": {"tool": 0}}):
        without = context(key_client, budget_tokens=4000, **leave_out)
        assert without["tools"] == [] and without["tools_tokens"] == 0 and without["parts"], leave_out


def test_parts_format_leaves_the_text_out(corpus, key_client):
    answer = context(key_client, budget_tokens=4000, format="parts")
    assert answer["text"] == "" and answer["parts"] and answer["tokens_used"] > 0


@pytest.mark.parametrize(
    "payload", [{"budget_tokens": 10}, {"budget_tokens": 10_000_000}, {}, {"budget_tokens": 500, "k": {"file": -1}}]
)
def test_an_invalid_budget_or_k_is_a_clear_422(payload, key_client):
    response = key_client.post(
        "/api/v1/context", data=json.dumps({"query": QUERY, **payload}), content_type="application/json"
    )
    assert response.status_code == 422 and response.json()["error"].startswith("invalid request")


def test_a_bot_can_verify_each_cited_range_with_read(corpus, key_client):
    answer = context(key_client, budget_tokens=4000)
    files = [part for part in answer["parts"] if part["kind"] == "file"]
    assert files
    for part in files:
        read = key_client.get(
            "/api/v1/read",
            {"root": part["root"], "path": part["path"], "start": part["start_line"], "end": part["end_line"]},
        )
        assert read.status_code == 200, read.content
        assert read.json()["content"] == part["content"] and read.json()["citation"] == part["citation"]


RANKING_MD = """# Ranking

How ranking works: the lexical channel scores words with BM25, the vector channel scores meaning by cosine
similarity, and fusion merges the two ranked lists into one order before the reranker reorders the head.
"""
# A stylesheet that shares a word with the question ("work") and nothing of its meaning.
BASE_CSS = "".join(
    f".work-area-{n} {{ display: grid; margin: {n}px auto; padding: 0 {n}px; color: #{n:03d}; }}\n" for n in range(60)
)


def test_a_stylesheet_that_only_shares_a_word_is_left_out_of_the_context(tmp_path, settings, key_client):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    tree = tmp_path / "site"
    tree.mkdir()
    (tree / "ranking.md").write_text(RANKING_MD)
    (tree / "base.css").write_text(BASE_CSS)
    index_root(WorkspaceRoot.objects.create(name="site", path=str(tree)))
    query = "how does ranking work"
    searched = key_client.post(
        "/api/v1/search",
        data=json.dumps({"query": query, "sources": ["file"], "group": True}),
        content_type="application/json",
    ).json()["hits"]
    css = next(hit for hit in searched if hit["path"] == "base.css")  # search finds it: a shared word
    assert "lexical" in css["channels"] and css["channels"]["vector"]["score"] < settings.RAG_CONTEXT_MIN_SIMILARITY

    answer = context(key_client, query=query, budget_tokens=1500)
    assert {part["path"] for part in answer["parts"] if part["kind"] == "file"} == {"ranking.md"}
    assert "base.css" not in answer["text"]
    dropped = [d for d in answer["dropped"] if d["citation"].startswith("base.css")]
    assert dropped and all("below the relevance floor" in d["reason"] for d in dropped)
    assert "RAG_CONTEXT_MIN_SIMILARITY" in dropped[0]["reason"]

    settings.RAG_CONTEXT_MIN_SIMILARITY = -1.0  # no floor: the stylesheet spends the budget
    unfloored = context(key_client, query=query, budget_tokens=1500)
    assert "base.css" in {part["path"] for part in unfloored["parts"] if part["kind"] == "file"}


def test_a_skill_gives_its_matching_section_not_its_opening(db, settings, key_client):
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    for slug in demo_skills_load():
        services.skill_index(skill_id=Skill.objects.get(slug=slug).pk)
    query = "how do I write front matter for a skill"
    searched = key_client.post(
        "/api/v1/search", data=json.dumps({"query": query, "sources": ["skill"]}), content_type="application/json"
    ).json()["hits"]
    sections = [hit["heading_path"] for hit in searched if hit["source_key"].endswith("writing-skills")]
    # The opening (under the title alone) ranks first in meaning; the section that answers follows.
    assert sections[0] == "# Writing skills" and "# Writing skills > ## Front matter" in sections[1:]

    answer = context(key_client, query=query, budget_tokens=1500, k={"skill": 3, "file": 0, "tool": 0})
    skill = next(part for part in answer["parts"] if part["kind"] == "skill" and part["slug"] == "writing-skills")
    assert skill["section"] == "# Writing skills > ## Front matter"
    assert "YAML front matter" in skill["content"] and "A skill is a markdown document" not in skill["content"]
    assert skill["citation"] == "skill:writing-skills:9-14"
