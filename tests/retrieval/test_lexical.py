import pytest

from access.scope import Scope
from retrieval.choices import LexicalRanking
from retrieval.lexical import lexical_candidates
from sources import services
from sources.models import Chunk
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db


def skill(slug: str, body: str) -> None:
    services.skill_index(skill_id=SkillFactory(slug=slug, body=body).pk)


def found(query: str, **options) -> list[str]:
    ids = [c.chunk_id for c in lexical_candidates(query=query, scope=Scope(), limit=10, **options)]
    slugs = dict(Chunk.objects.filter(pk__in=ids).values_list("pk", "source__key"))
    return [slugs[i].removeprefix("skill:") for i in ids]


def test_bm25_weighs_a_rare_word_over_a_common_one():
    # "python" is in every skill, "zeppelin" in one: BM25's IDF ranks the
    # zeppelin skill first although another says "python" three times.
    for i in range(6):
        skill(f"python-{i}", f"# Notes {i}\n\nPython tips, part {i}.\n")
    skill("python-heavy", "# Heavy\n\nPython, python and more python for everyone.\n")
    skill("airship", "# Airship\n\nA zeppelin story told in Python.\n")
    assert found("python zeppelin")[0] == "airship"
    assert found("python zeppelin", ranking=LexicalRanking.TS_RANK)  # the old ranking still answers


def test_idf_counts_the_whole_table_not_just_the_candidates():
    # "glacier" is in three of the candidates but in few of the table's
    # chunks, so it is rare and four mentions beat one "fjord". Counted
    # over the candidates alone (a table never analyzed) it looked common.
    for i in range(40):
        skill(f"filler-{i}", f"# Note {i}\n\nUnrelated words about cooking, number {i}.\n")
    skill("repeated", "# Note\n\nGlacier, glacier, glacier, glacier.\n")
    skill("single", "# Note\n\nA fjord.\n")
    skill("also-1", "# Note\n\nOne glacier among many other words here.\n")
    skill("also-2", "# Note\n\nAnother glacier among many other words here.\n")
    assert found("glacier fjord")[0] == "repeated"


def test_identifiers_in_the_body_are_found_by_their_words():
    skill("paths", "# Paths\n\n```python\nfull = os.path.join(base, name)\nserver = HttpServerConfig()\n```\n")
    skill("other", "# Other\n\nNothing to see here.\n")
    assert found("path join") == ["paths"]
    assert found("server config") == ["paths"]
    assert found("HttpServerConfig") == ["paths"]  # as typed, split the same way


def test_a_query_without_indexable_words_falls_back_to_a_substring_match():
    skill("arrows", "# Arrows\n\nIn C, p->next follows the list; p->next->next skips one.\n")
    skill("plain", "# Plain\n\nNo pointers at all.\n")
    assert found("->") == ["arrows"]
    assert found("to be or not to be") == []  # stop words only, and no such text


def test_quoted_phrases_and_exclusions_are_honoured():
    skill("pasta", "# Pasta\n\nBoil pasta in salted water.\n")
    skill("sea", "# Sea\n\nThe water of the sea is salted; boil it to get salt.\n")
    assert set(found("salted water boil")) == {"pasta", "sea"}
    assert found('"salted water"') == ["pasta"]
    assert found("boil water -pasta") == ["sea"]


def literals(expression, function: str) -> set[tuple]:
    """The Value arguments of every ``function`` call in ``expression``."""
    from django.db.models import Func, Value

    found = set()
    if isinstance(expression, Func) and expression.extra.get("function", expression.function) == function:
        found.add(tuple(e.value for e in expression.get_source_expressions() if isinstance(e, Value)))
    for inner in getattr(expression, "get_source_expressions", list)():  # F has none
        found |= literals(inner, function)
    return found


def test_the_query_splits_identifiers_as_the_migrated_column_does():
    # The migration keeps its own literals; the query's SQL takes its pattern from the constants.
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    from retrieval.lexical import lexeme_params
    from sources.models import IDENTIFIER_CAMEL, IDENTIFIER_SEPARATORS

    migrated = MigrationLoader(connection).project_state().apps.get_model("sources", "Chunk")
    expression = migrated._meta.get_field("search_vector").expression
    assert literals(expression, "regexp_replace") == {(*IDENTIFIER_CAMEL, "g")}
    assert literals(expression, "translate") == {(IDENTIFIER_SEPARATORS, " " * len(IDENTIFIER_SEPARATORS))}
    params = lexeme_params("x")
    assert (params["identifier_camel"], params["identifier_camel_to"]) == IDENTIFIER_CAMEL
    assert (params["identifier_separators"], params["identifier_spaces"]) == (
        IDENTIFIER_SEPARATORS,
        " " * len(IDENTIFIER_SEPARATORS),
    )


def test_an_identifier_in_the_query_finds_its_words():
    skill("naming", "# Naming\n\nThe run query helper of chunk search.\n")
    assert found("ChunkSearch.run_query") == ["naming"]
