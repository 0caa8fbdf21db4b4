"""Issue 39 item 2: a git root names a credential the operator bound (RAG_GIT_CREDENTIALS_DIR), never a file,
an environment variable or a token in its URL.

A root that had one keeps it nowhere: ``git_credential_legacy`` says what it
was (the file's path, the variable's name, "a user name or token in the URL"),
and the root's next job fails with what to do (sources/git_credentials.py,
``legacy_advice``) instead of fetching without it or sending it anywhere. A
URL's user info is removed from the stored URL: the admin showed it back.
"""

import re

from django.db import migrations, models

_HTTPS_USERINFO = re.compile(r"^(?P<scheme>https?://)[^/@]*@")
_SSH_PASSWORD = re.compile(r"^(?P<scheme>ssh://)(?P<user>[^/@:]*):[^/@]*@")


def credentials_carry_over(apps, schema_editor):
    WorkspaceRoot = apps.get_model("sources", "WorkspaceRoot")
    roots = WorkspaceRoot.objects.using(schema_editor.connection.alias).exclude(git_url="")
    for root in roots:
        legacy, url = [], root.git_url
        if root.git_credential_file:
            legacy.append(f"the credential file {root.git_credential_file}")
        if root.git_credential_env:
            legacy.append(f"the environment variable {root.git_credential_env}")
        if _HTTPS_USERINFO.match(url):
            url = _HTTPS_USERINFO.sub(r"\g<scheme>", url)
            legacy.append("a user name or token in the URL (removed from it)")
        elif _SSH_PASSWORD.match(url):
            url = _SSH_PASSWORD.sub(r"\g<scheme>\g<user>@", url)
            legacy.append("a password in the URL (removed from it)")
        if legacy:
            root.git_url = url
            root.git_credential_legacy = " and ".join(legacy)[:1200]
            root.save(update_fields=["git_url", "git_credential_legacy"])


class Migration(migrations.Migration):
    dependencies = [("sources", "0019_hnsw_ef_construction")]

    operations = [
        migrations.AddField(
            model_name="workspaceroot",
            name="git_credential",
            field=models.CharField(
                blank=True,
                help_text="The name of a credential the operator bound in RAG_GIT_CREDENTIALS_DIR (NAME.toml: its "
                "host, and its token or ssh key); it is sent only to the host it is bound to. Empty: none (a public "
                "repository).",
                max_length=64,
                verbose_name="credential",
            ),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="git_credential_legacy",
            field=models.CharField(blank=True, editable=False, max_length=1200),
        ),
        migrations.RunPython(credentials_carry_over, migrations.RunPython.noop),
        migrations.RemoveField(model_name="workspaceroot", name="git_credential_env"),
        migrations.RemoveField(model_name="workspaceroot", name="git_credential_file"),
        migrations.AlterField(
            model_name="workspaceroot",
            name="git_url",
            field=models.CharField(
                blank=True,
                help_text="Empty: a directory root. https://, ssh:// (or user@host:path) or file:// for a local bare "
                "repository. No user name, password or token in an https URL: name a bound credential below.",
                max_length=1024,
                verbose_name="git URL",
            ),
        ),
    ]
