"""Issue 23 item 2: sources referenced by keys.

``Source.root`` points every source of a workspace root (its default segment
and each segment's) to the root, and is back-filled from the stored key
string. The owners' links (WorkspaceRoot.source, Segment.source, Skill.source,
Tool.source) already existed; any still empty is filled from the key too, so
from here on code navigates by these keys and never parses the string.

A source whose key names a root (or segment) that no longer exists keeps a
null reference: nothing is deleted here.
"""

import re

import django.db.models.deletion
from django.db import migrations, models

# Copied, not imported: a migration must not depend on live code. The shapes written by
# sources.models.keys.source_key at the time of this migration.
_ROOT_KEY = re.compile(r"root:(?P<root>\d+)(?::segment:(?P<segment>\d+))?")
_SKILL_KEY = re.compile(r"skill:(?P<slug>.+)")
_TOOL_KEY = re.compile(r"tool:(?P<key>.+)")


def references_backfill(apps, schema_editor) -> None:
    Source = apps.get_model("sources", "Source")
    WorkspaceRoot = apps.get_model("sources", "WorkspaceRoot")
    Segment = apps.get_model("sources", "Segment")
    Skill = apps.get_model("sources", "Skill")
    Tool = apps.get_model("sources", "Tool")
    roots = set(WorkspaceRoot.objects.values_list("pk", flat=True))
    segment_roots = dict(Segment.objects.values_list("pk", "root_id"))
    for source_id, kind, key in Source.objects.values_list("pk", "kind", "key").iterator():
        if kind == "file" and (found := _ROOT_KEY.fullmatch(key)):
            root_id = int(found["root"])
            if root_id not in roots:
                continue
            Source.objects.filter(pk=source_id).update(root_id=root_id)
            if found["segment"] is None:
                _link(WorkspaceRoot, owner_id=root_id, source_id=source_id)
            elif segment_roots.get(int(found["segment"])) == root_id:
                _link(Segment, owner_id=int(found["segment"]), source_id=source_id)
        elif kind == "skill" and (found := _SKILL_KEY.fullmatch(key)):
            owner = Skill.objects.filter(slug=found["slug"]).values_list("pk", flat=True).first()
            if owner is not None:
                _link(Skill, owner_id=owner, source_id=source_id)
        elif kind == "tool" and (found := _TOOL_KEY.fullmatch(key)):
            owner = Tool.objects.filter(key=found["key"]).values_list("pk", flat=True).first()
            if owner is not None:
                _link(Tool, owner_id=owner, source_id=source_id)
    # The updates' deferred foreign-key checks run now: PostgreSQL refuses to alter a table with pending ones.
    schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _link(model, *, owner_id: int, source_id: int) -> None:
    # Only an empty link is filled: one already set was written by the sync services and wins,
    # and a source another owner already holds stays with it (the links are one-to-one).
    if not model.objects.filter(source_id=source_id).exists():
        model.objects.filter(pk=owner_id, source__isnull=True).update(source_id=source_id)


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0010_root_identity"),
    ]

    operations = [
        migrations.AddField(
            model_name="source",
            name="root",
            field=models.ForeignKey(
                blank=True,
                editable=False,
                help_text="For workspace files: the root whose files these are.",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="sources",
                to="sources.workspaceroot",
            ),
        ),
        migrations.RunPython(references_backfill, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="source",
            constraint=models.CheckConstraint(
                condition=models.Q(("root__isnull", True), ("kind", "file"), _connector="OR"),
                name="source_root_only_for_files",
            ),
        ),
    ]
