"""Backup's parts that need no database: retention, and how the tools get the connection."""

import pytest

from rag_site.backup.manifest import MANIFEST_NAME
from rag_site.backup.pgtools import Database
from rag_site.backup.services import backups_prune

pytestmark = pytest.mark.unit


def test_pruning_leaves_what_is_not_a_scheduled_backup(tmp_path):
    for name in ("rag-site-1", "rag-site-2", "rag-site-3", "mine"):
        (tmp_path / name).mkdir()
        (tmp_path / name / MANIFEST_NAME).write_text("{}")
    assert [p.name for p in backups_prune(directory=tmp_path, keep=1)] == ["rag-site-1", "rag-site-2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "rag-site-3"]


def test_the_password_reaches_the_tools_in_the_environment_only():
    database = Database.from_settings(
        {
            "NAME": "rag",
            "HOST": "db",
            "PORT": 5432,
            "USER": "rag",
            "PASSWORD": "s3cret",
            "OPTIONS": {"sslmode": "require"},
        }
    )
    assert database.env() == {
        "PGDATABASE": "rag",
        "PGHOST": "db",
        "PGPORT": "5432",
        "PGUSER": "rag",
        "PGPASSWORD": "s3cret",
        "PGSSLMODE": "require",
    }
