"""Backup and restore (rag_site/backup/): a restored database answers searches exactly like the one backed up."""

import io
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from access.keys import api_key_create
from rag_site.backup.config import code_migrations
from rag_site.backup.errors import BackupError
from rag_site.backup.manifest import DUMP_NAME, MANIFEST_NAME, Manifest, file_sha256
from rag_site.backup.pgtools import Database, tool_path
from rag_site.backup.services import backup_create, backup_restore
from retrieval.search import Mode, chunks_search
from sources import services
from sources.models import Chunk, Skill, WorkspaceRoot
from tests.conftest import index_root
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db(transaction=True)  # pg_dump, another session, sees only committed rows

QUERIES = ["restore last night's dump", "boil pasta", "deploy containers", "invoice totals", "rollback"]


@pytest.fixture
def content(tmp_path, settings) -> str:
    """Skills, a root of a few indexed files and an API key, committed; returns the key."""
    bodies = {
        "deploy": "# Deploy\n\nShip the containers with docker compose.\n\n## Rollback\n\nRestore last night's dump.\n",
        "cooking": "# Cooking\n\nBoil pasta in salted water for nine minutes.\n",
    }
    for slug, body in bodies.items():
        services.skill_index(skill_id=SkillFactory(slug=slug, body=body).pk)
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README.md").write_text("# Repo\n\nHow to roll back a release.\n")
    (repo / "billing.py").write_text("def invoice_total(lines):\n    return sum(l.amount for l in lines)\n")
    (repo / "notes.md").write_text("# Notes\n\nThe dump runs at night.\n")
    index_root(WorkspaceRoot.objects.create(name="repo", path=str(repo)))
    _, raw = api_key_create(name="bot")
    return raw


def this_database() -> Database:
    return Database.from_settings(connection.settings_dict)


@pytest.fixture
def other_database():
    """A second, empty database on the same server; dropped afterwards."""
    admin = Database.from_settings(connection.settings_dict, name="postgres")
    name = f"{connection.settings_dict['NAME']}_restored"
    with psycopg.connect(admin.conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    yield Database.from_settings(connection.settings_dict, name=name)
    with psycopg.connect(admin.conninfo(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def searches(key: str) -> list:
    """Ids and scores of a set of searches, in the engine and through the API with the key."""
    results = []
    for query in QUERIES:
        for mode in Mode:
            results.append([(hit.chunk.pk, hit.score) for hit in chunks_search(query=query, mode=mode, k=10)])
        response = Client(headers={"Authorization": f"Bearer {key}"}).post(
            "/api/v1/search", data=json.dumps({"query": query, "k": 10}), content_type="application/json"
        )
        assert response.status_code == 200, response.content
        results.append([(r["chunk_id"], r["score"]) for r in response.json()["hits"]])
    return results


def pointed_at(name: str):
    """Point the default connection at another database (closed first, so the next query opens it there)."""
    connection.close()
    previous = connection.settings_dict["NAME"]
    connection.settings_dict["NAME"] = name
    return previous


def test_a_restore_into_another_database_gives_identical_search_results(content, tmp_path, other_database):
    before = searches(content)
    assert any(before), "the searches must find something for the comparison to mean anything"
    manifest = backup_create(target=tmp_path / "backup", database=this_database())
    assert manifest.counts["sources.Skill"] == 2 and manifest.counts["access.ApiKey"] == 1
    assert manifest.counts["sources.Chunk"] == Chunk.objects.count() > 0
    assert manifest.migrations["sources"] and manifest.embedding_models

    report = backup_restore(source=tmp_path / "backup", database=other_database, known_migrations=code_migrations())
    assert report.counts == manifest.counts and report.pending == []
    previous = pointed_at(other_database.name)
    try:
        assert searches(content) == before
    finally:
        pointed_at(previous)


def test_a_database_that_holds_data_is_refused_unless_forced(content, tmp_path):
    call_command("rag_backup", str(tmp_path / "backup"))
    Skill.objects.filter(slug="cooking").delete()
    with pytest.raises(CommandError, match=r"holds data .*--force"):
        call_command("rag_restore", str(tmp_path / "backup"))
    assert not Skill.objects.filter(slug="cooking").exists()  # refused: nothing changed

    call_command("rag_restore", str(tmp_path / "backup"), "--force")
    assert Skill.objects.filter(slug="cooking").exists()


def test_a_restore_that_fails_leaves_the_database_as_it_was(content, tmp_path):
    backup_create(target=tmp_path / "backup", database=this_database())
    Skill.objects.filter(slug="cooking").delete()
    chunks = Chunk.objects.count()
    # Another session holds a table (as a running web process would): the restore cannot drop it, gives up.
    with psycopg.connect(this_database().conninfo()) as other:
        other.execute(f"LOCK TABLE {Skill._meta.db_table} IN ACCESS SHARE MODE")
        with pytest.raises(BackupError, match="in use.*stop the web and worker processes"):
            backup_restore(
                source=tmp_path / "backup",
                database=this_database(),
                known_migrations=code_migrations(),
                force=True,
                lock_timeout="1s",
            )
    assert not Skill.objects.filter(slug="cooking").exists() and Chunk.objects.count() == chunks


def test_a_pg_restore_that_dies_half_way_commits_nothing(content, tmp_path):
    backup_create(target=tmp_path / "backup", database=this_database())
    Skill.objects.filter(slug="cooking").delete()
    chunks = Chunk.objects.count()
    # A pg_restore that writes its script up to the first table's data and dies (a disk error, a killed process):
    # every statement it wrote is whole, so only the missing COMMIT keeps psql from committing an empty schema.
    real = Path(tool_path("pg_restore", bin_dir=""))
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "psql").symlink_to(real.with_name("psql"))
    (tools / "pg_restore").write_text(f'#!/bin/sh\n"{real}" "$@" | sed "/^-- Data for Name/q"\nexit 1\n')
    (tools / "pg_restore").chmod(0o755)
    with pytest.raises(BackupError, match="pg_restore could not read the dump; nothing was restored"):
        backup_restore(
            source=tmp_path / "backup",
            database=this_database(),
            known_migrations=code_migrations(),
            force=True,
            bin_dir=str(tools),
        )
    assert not Skill.objects.filter(slug="cooking").exists() and Chunk.objects.count() == chunks


def test_a_damaged_dump_is_refused_by_its_checksum(content, tmp_path, other_database):
    backup_create(target=tmp_path / "backup", database=this_database())
    dump = tmp_path / "backup" / DUMP_NAME
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0xFF
    dump.write_bytes(bytes(data))
    with pytest.raises(BackupError, match="does not match the checksum"):
        backup_restore(source=tmp_path / "backup", database=other_database, known_migrations=code_migrations())


def test_a_backup_from_newer_migrations_is_refused(content, tmp_path, other_database):
    backup_create(target=tmp_path / "backup", database=this_database())
    manifest_path = tmp_path / "backup" / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    manifest["migrations"]["sources"].append("9999_from_the_future")
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(BackupError, match=r"newer rag-site.*sources\.9999_from_the_future"):
        backup_restore(source=tmp_path / "backup", database=other_database, known_migrations=code_migrations())


def test_a_backup_never_overwrites_an_existing_directory(tmp_path):
    (tmp_path / "backup").mkdir()
    (tmp_path / "backup" / "precious.txt").write_text("keep me")
    with pytest.raises(CommandError, match="already exists"):
        call_command("rag_backup", str(tmp_path / "backup"))
    assert (tmp_path / "backup" / "precious.txt").read_text() == "keep me"


def test_the_scheduled_backup_keeps_the_newest(tmp_path, settings):
    from rag_site.tasks import backup_scheduled_task

    settings.RAG_BACKUP_DIR, settings.RAG_BACKUP_HOURS, settings.RAG_BACKUP_KEEP = tmp_path, 1, 2
    for stamp in ("20200101T000000Z", "20210101T000000Z"):
        old = tmp_path / f"rag-site-{stamp}"
        old.mkdir()
        (old / MANIFEST_NAME).write_text("{}")
    written = Path(backup_scheduled_task())
    assert Manifest.read(written).dump_sha256
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rag-site-20210101T000000Z", written.name]


def test_the_scheduled_backup_does_nothing_when_off(tmp_path, settings):
    from rag_site.tasks import backup_scheduled_task

    settings.RAG_BACKUP_DIR, settings.RAG_BACKUP_HOURS = tmp_path, 0
    assert backup_scheduled_task() is None and not any(tmp_path.iterdir())


def documents_make(directory: Path) -> Path:
    (directory / "ab").mkdir(parents=True)
    (directory / "ab" / "report.pdf").write_bytes(b"%PDF-1.4 not really")
    return directory


def session_rows(database: Database) -> int:
    with psycopg.connect(database.conninfo()) as conn:
        row = conn.execute("SELECT count(*) FROM django_session").fetchone()
    assert row is not None
    return row[0]


def signed_in_admin() -> Client:
    from django.contrib.auth import get_user_model

    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("backup-admin", password="not-used-elsewhere-7"))
    assert admin.get("/admin/").status_code == 200
    return admin


def test_a_backup_is_readable_by_its_owner_only_whatever_the_umask(tmp_path):
    documents = documents_make(tmp_path / "documents")
    previous = os.umask(0o022)
    try:
        backup_create(target=tmp_path / "backup", database=this_database(), documents_dir=documents)
    finally:
        os.umask(previous)
    entries = [tmp_path / "backup", *(tmp_path / "backup").rglob("*")]
    assert {p.name for p in entries} >= {"backup", DUMP_NAME, MANIFEST_NAME, "documents", "ab", "report.pdf"}
    modes = {str(p.relative_to(tmp_path)): stat.S_IMODE(p.lstat().st_mode) for p in entries}
    assert modes == {name: 0o700 if (tmp_path / name).is_dir() else 0o600 for name in modes}


def test_the_scheduled_backups_directory_is_created_owner_only(tmp_path, settings):
    from rag_site.tasks import backup_scheduled_task

    settings.RAG_BACKUP_DIR, settings.RAG_BACKUP_HOURS, settings.RAG_BACKUP_KEEP = tmp_path / "backups", 1, 2
    written = Path(backup_scheduled_task())
    assert stat.S_IMODE((tmp_path / "backups").stat().st_mode) == 0o700
    assert stat.S_IMODE(written.stat().st_mode) == 0o700


def test_a_backup_carries_no_session_that_could_sign_anyone_in(tmp_path, other_database):
    admin = signed_in_admin()
    assert session_rows(this_database()) >= 1
    backup_create(target=tmp_path / "backup", database=this_database())
    backup_restore(source=tmp_path / "backup", database=other_database, known_migrations=code_migrations())
    assert session_rows(other_database) == 0
    previous = pointed_at(other_database.name)
    try:
        # The cookie of a session that existed when the backup was made opens nothing in the restored database.
        assert admin.get("/admin/").status_code == 302
    finally:
        pointed_at(previous)


def test_a_restore_empties_the_sessions_an_older_backup_carries(tmp_path, other_database):
    signed_in_admin()
    backup_create(target=tmp_path / "backup", database=this_database())
    # What rag_backup wrote before sessions were left out: the whole database, sessions included.
    dump = tmp_path / "backup" / DUMP_NAME
    dump.unlink()
    pg_dump = tool_path("pg_dump", bin_dir="")
    subprocess.run(
        [pg_dump, "--format=custom", f"--file={dump}"], env={**os.environ, **this_database().env()}, check=True
    )
    manifest = json.loads((tmp_path / "backup" / MANIFEST_NAME).read_text())
    manifest["dump_sha256"] = file_sha256(dump)
    (tmp_path / "backup" / MANIFEST_NAME).write_text(json.dumps(manifest))

    backup_restore(source=tmp_path / "backup", database=other_database, known_migrations=code_migrations())
    assert session_rows(other_database) == 0


@pytest.mark.parametrize("link", ["documents/ab/passwd", "documents/etc", "documents"])
def test_a_restore_refuses_a_backup_with_a_symbolic_link_among_its_documents(tmp_path, other_database, link):
    backup_create(
        target=tmp_path / "backup", database=this_database(), documents_dir=documents_make(tmp_path / "documents")
    )
    secrets_dir = tmp_path / "elsewhere"
    secrets_dir.mkdir()
    (secrets_dir / "passwd").write_text("root:x:0:0\n")
    tampered = tmp_path / "backup" / link
    if tampered.exists():
        shutil.rmtree(tampered)
    tampered.symlink_to(secrets_dir / "passwd" if link.endswith("passwd") else secrets_dir)
    restored_documents = tmp_path / "restored-documents"

    with pytest.raises(BackupError, match=r"is a symbolic link: .* altered; nothing was restored"):
        backup_restore(
            source=tmp_path / "backup",
            database=other_database,
            known_migrations=code_migrations(),
            documents_dir=restored_documents,
        )
    assert not restored_documents.exists()
    with psycopg.connect(other_database.conninfo()) as conn:
        assert conn.execute("SELECT to_regclass('django_session')").fetchone() == (None,)  # no database restored


@pytest.mark.slow  # exports the embedding model once more, into an empty cache
def test_a_restore_exports_the_embedding_models_so_the_first_search_does_not(content, tmp_path, monkeypatch):
    """After a restore onto a machine without the ONNX export, the first searches waited for it (issue 43)."""
    call_command("rag_backup", str(tmp_path / "backup"))
    models = Manifest.read(tmp_path / "backup").embedding_models
    assert any(m["name"].endswith("#onnx") for m in models), models  # the default backend: there is an export
    monkeypatch.setenv("RAG_VAR_DIR", str(tmp_path / "fresh-var"))  # a machine that has never exported it
    cache = tmp_path / "fresh-var" / "models" / "onnx"

    out = io.StringIO()
    call_command("rag_restore", str(tmp_path / "backup"), "--force", "--no-warm-up", stdout=out)
    assert not cache.exists() and "ONNX export ready" not in out.getvalue()

    call_command("rag_restore", str(tmp_path / "backup"), "--force", stdout=out)
    exports = list(cache.glob("onnx-*/model.onnx"))
    assert len(exports) == 1 and exports[0].stat().st_size > 1_000_000
    assert f"ONNX export ready ({exports[0].parent})" in out.getvalue()
