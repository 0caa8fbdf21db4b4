"""Issue 23 item 2: a source is reached by its foreign keys, never by parsing its key string."""

import re
from pathlib import Path

import pytest
from django.db import IntegrityError, transaction

from sources.models import Chunk, Segment, Skill, Source, Tool, WorkspaceRoot, source_key, unowned_source_key
from sources.roots import root_sources
from tests.migrating import migrate
from tests.test_import_graph import ORDER

REPO = Path(__file__).resolve().parents[2]
BEFORE = [("sources", "0010_root_identity")]
AFTER = [("sources", "0011_source_references")]


@pytest.fixture
def root(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    (tmp_path / "repo").mkdir()
    return WorkspaceRoot.objects.create(name="repo", path=str(tmp_path / "repo"), cooldown_seconds=0)


@pytest.fixture
def latest_schema_after():
    """Whatever a test migrated the database to, the tests after it find the latest schema again."""
    yield
    migrate()


@pytest.mark.django_db(transaction=True)
def test_the_migration_back_fills_every_reference_from_the_stored_keys(latest_schema_after):
    old = migrate(BEFORE)
    try:
        OldSource, OldRoot = old.get_model("sources", "Source"), old.get_model("sources", "WorkspaceRoot")
        OldSegment, OldSkill, OldTool = (old.get_model("sources", name) for name in ("Segment", "Skill", "Tool"))
        root = OldRoot.objects.create(name="old", path="/nowhere/old")
        other = OldRoot.objects.create(name="other", path="/nowhere/other")
        docs = OldSegment.objects.create(root=root, name="docs", path_glob="docs/**")
        default = OldSource.objects.create(kind="file", key=f"root:{root.pk}")
        segment = OldSource.objects.create(kind="file", key=f"root:{root.pk}:segment:{docs.pk}")
        # Linked by an earlier sync: the link stays as it is.
        linked = OldSource.objects.create(kind="file", key=f"root:{other.pk}")
        OldRoot.objects.filter(pk=other.pk).update(source=linked)
        # A deleted segment's source, not yet swept: it still belongs to its root.
        leftover = OldSource.objects.create(kind="file", key=f"root:{root.pk}:segment:{docs.pk + 1000}")
        orphan = OldSource.objects.create(kind="file", key=f"root:{other.pk + 1000}")  # its root is gone
        skill_source = OldSource.objects.create(kind="skill", key="skill:cooking")
        skill = OldSkill.objects.create(slug="cooking", body="# Cooking")
        tool_source = OldSource.objects.create(kind="tool", key="tool:local:weather")
        tool = OldTool.objects.create(key="local:weather", name="weather")
        dataset = OldSource.objects.create(kind="dataset", key="dataset:root:7")
    finally:
        new = migrate(AFTER)

    NewSource = new.get_model("sources", "Source")
    roots_of = dict(NewSource.objects.values_list("pk", "root_id"))
    assert roots_of[default.pk] == roots_of[segment.pk] == roots_of[leftover.pk] == root.pk
    assert roots_of[linked.pk] == other.pk
    assert roots_of[orphan.pk] is None and roots_of[dataset.pk] is None  # nothing is deleted
    assert roots_of[skill_source.pk] is None and roots_of[tool_source.pk] is None
    owners = {
        (name, pk): source_id
        for name in ("WorkspaceRoot", "Segment", "Skill", "Tool")
        for pk, source_id in new.get_model("sources", name).objects.values_list("pk", "source_id")
    }
    assert owners[("WorkspaceRoot", root.pk)] == default.pk
    assert owners[("WorkspaceRoot", other.pk)] == linked.pk
    assert owners[("Segment", docs.pk)] == segment.pk
    assert owners[("Skill", skill.pk)] == skill_source.pk
    assert owners[("Tool", tool.pk)] == tool_source.pk


@pytest.mark.django_db
def test_every_source_of_a_root_points_to_it(root):
    Segment.objects.create(root=root, name="docs", path_glob="docs/**")
    root.refresh_from_db()
    sources = list(root_sources(root))
    assert len(sources) == 2
    assert {source.pk for source in sources} == {root.source_id, Segment.objects.get().source_id}
    assert {source.key for source in sources} == {source_key(root), source_key(Segment.objects.get())}


@pytest.mark.django_db
def test_a_deleted_segments_source_is_found_by_its_root_and_removed(root):
    segment = Segment.objects.create(root=root, name="docs", path_glob="docs/**")
    gone = Segment.objects.get(pk=segment.pk).source_id
    segment.delete()
    assert not Source.objects.filter(pk=gone).exists()
    assert list(root_sources(root).values_list("pk", flat=True)) == [WorkspaceRoot.objects.get().source_id]


@pytest.mark.django_db
def test_deleting_a_root_deletes_its_sources_and_chunks_and_recreates_none(root):
    Segment.objects.create(root=root, name="docs", path_glob="docs/**")
    source = Source.objects.get(pk=WorkspaceRoot.objects.get().source_id)
    Chunk.objects.create(
        source=source,
        path="a.md",
        chunk_index=0,
        content="x",
        start_line=1,
        end_line=1,
        content_hash="x",
        chunking_version="1",
    )
    root.delete()
    assert not Source.objects.filter(kind=Source.Kind.FILE).exists()
    assert not Chunk.objects.exists()


@pytest.mark.django_db
def test_only_a_file_source_can_belong_to_a_root(root):
    with pytest.raises(IntegrityError), transaction.atomic():
        Source.objects.create(kind=Source.Kind.SKILL, key="skill:stray", root=root)


@pytest.mark.django_db
def test_a_renamed_skill_keeps_its_source_and_its_key_follows():
    skill = Skill.objects.create(slug="cooking", body="# Cooking")
    source_id = Skill.objects.get().source_id
    skill.slug = "baking"
    skill.save()
    assert Skill.objects.get().source_id == source_id
    assert Source.objects.get(pk=source_id).key == source_key(skill) == "skill:baking"


@pytest.mark.django_db
def test_a_tools_source_is_its_own():
    tool = Tool.objects.create(name="weather", description="The weather.")
    assert Tool.objects.get().source.key == source_key(tool)


@pytest.mark.unit
def test_a_source_no_row_owns_gets_its_key_from_the_same_module():
    assert unowned_source_key("dataset", "msmarco-5k") == "dataset:msmarco-5k"
    assert unowned_source_key("bench", 10_000) == "bench:10000"
    with pytest.raises(ValueError, match="no unowned source is a 'root'"):
        unowned_source_key("root", 7)  # type: ignore[arg-type]


# What a source key starts with: every kind of source (a new kind is covered when it is added), a root's segment,
# and the bench's corpus, which no kind names.
KEY_PREFIXES = sorted({kind.value for kind in Source.Kind} | {"root", "segment", "bench"})
# What building or parsing a key string looks like: f"root:{...}", "skill:" + ..., a prefix constant "bench:",
# source.key.split(":"), .removeprefix("skill:"), key__startswith=...
KEY_STRING = re.compile(
    rf"""\b(?:{"|".join(KEY_PREFIXES)}):\{{"""  # an f-string: f"memory:{memory.pk}"
    rf"""|["'](?:{"|".join(KEY_PREFIXES)}):(?:["']|\d)"""  # a literal: "skill:" + slug, "bench:", "document:7"
    r"""|\bkey\.split\(|(?:\.key|source_key\(.*\))\.(?:r?split|r?partition|removeprefix|startswith|endswith)\("""
    r"""|\bkey__i?(?:startswith|endswith|contains|regex)\b"""  # an ORM lookup into the string
)


@pytest.mark.unit
@pytest.mark.parametrize(
    "line",
    [
        'citation_key=f"memory:{memory.pk}",',
        'key=f"dataset:{dataset.name}", defaults={"kind": Source.Kind.DATASET}',
        'KEY_PREFIX = "bench:"',
        'key=f"root:{root.pk}:segment:{segment.pk}"',
        'Source.objects.get(key="skill:" + slug)',
        'Source.objects.filter(key="document:7")',
        'owner = source.key.split(":")[1]',
        'slug = source.key.removeprefix("skill:")',
        "Source.objects.filter(key__startswith=prefix)",
    ],
)
def test_the_guard_sees_a_hand_built_or_parsed_key(line):
    assert KEY_STRING.search(line)


@pytest.mark.unit
@pytest.mark.parametrize(
    "line",
    [
        "key=source_key(memory),",
        'key=unowned_source_key("bench", chunks),',
        "f\"  root: {report.get('url')}\"",  # a report's label, not a key
        'mode = key.removeprefix("pooling_mode_")',  # a config dict's key
        '"`source_key` (root:<id>). "',  # documentation of the shape
        '"root": "root:django",',  # the query language's filter names a root by its name
        'if not url.startswith("file://"):',
    ],
)
def test_the_guard_leaves_other_strings_alone(line):
    assert not KEY_STRING.search(line)


@pytest.mark.unit
def test_no_code_builds_or_parses_a_source_key_but_source_key():
    allowed = {REPO / "sources" / "models" / "keys.py"}
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for package in ORDER
        for path in sorted((REPO / package).rglob("*.py"))
        if path not in allowed and "migrations" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if KEY_STRING.search(line)
    ]
    assert found == []
