"""Migration 0020 (issue 39 item 2): roots that named a credential file or variable, or kept a token in their URL,
keep none of it and say what to do; others are untouched."""

import pytest

from tests.migrating import migrate

BEFORE = [("sources", "0019_hnsw_ef_construction")]
AFTER = [("sources", "0020_git_credential_bindings")]


@pytest.fixture
def latest_schema_after():
    yield
    migrate()


@pytest.mark.django_db(transaction=True)
def test_the_upgrade_drops_old_credentials_and_leaves_a_note_on_the_root(latest_schema_after, tmp_path):
    old = migrate(BEFORE)
    try:
        OldRoot = old.get_model("sources", "WorkspaceRoot")
        for name, fields in {
            "by-file": {"git_url": "https://github.com/org/a.git", "git_credential_file": "/app/var/secret_key"},
            "by-env": {"git_url": "git@github.com:org/b.git", "git_credential_env": "RAG_METRICS_TOKEN"},
            "in-url": {"git_url": "https://ghp_abcdefabcdef0123@github.com/org/c.git"},
            "public": {"git_url": "https://github.com/org/d.git"},
            "directory": {},
        }.items():
            OldRoot.objects.create(name=name, path=str(tmp_path / name), **fields)
    finally:
        new = migrate(AFTER)
    # The model as 0020 left it: today's has fields of later migrations.
    roots = {root.name: root for root in new.get_model("sources", "WorkspaceRoot").objects.all()}
    assert roots["by-file"].git_credential_legacy == "the credential file /app/var/secret_key"
    assert roots["by-env"].git_credential_legacy == "the environment variable RAG_METRICS_TOKEN"
    assert roots["in-url"].git_url == "https://github.com/org/c.git"
    assert "a user name or token in the URL" in roots["in-url"].git_credential_legacy
    assert all(not roots[name].git_credential_legacy for name in ("public", "directory"))
    assert not any(root.git_credential for root in roots.values())
