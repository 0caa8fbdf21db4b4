"""Issue 25 item 1: a workspace root can be a git remote.

Its URL, branch, credential references (a file path or a variable name, never the secret), permalink
template, webhook salt, and the last indexed commit.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0015_help_text_placeholders"),
    ]

    operations = [
        migrations.AddField(
            model_name="workspaceroot",
            name="git_branch",
            field=models.CharField(blank=True, default="main", max_length=255, verbose_name="git branch"),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="git_commit",
            field=models.CharField(
                blank=True, editable=False, help_text="The last commit indexed in full (git roots).", max_length=64
            ),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="git_credential_env",
            field=models.CharField(
                blank=True,
                help_text=(
                    "Name of an environment variable of the worker holding an https token (TOKEN or USER:TOKEN). "
                    "Only the name is stored."
                ),
                max_length=255,
                verbose_name="credential environment variable",
            ),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="git_credential_file",
            field=models.CharField(
                blank=True,
                help_text=(
                    "Absolute path of a file the worker reads: an ssh private key (ssh URLs) or an https token "
                    "(TOKEN or USER:TOKEN). Only the path is stored."
                ),
                max_length=1024,
                verbose_name="credential file",
            ),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="git_error",
            field=models.TextField(blank=True, editable=False, help_text="Why the last fetch failed (redacted)."),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="git_indexed_branch",
            field=models.CharField(blank=True, editable=False, max_length=255),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="git_permalink",
            field=models.CharField(
                blank=True,
                help_text=(
                    "A link a person can open for a hit, e.g. "
                    "https://github.com/org/repo/blob/{commit}/{path}#L{start}-L{end}. Fields: {commit} {path} "
                    "{start} {end}. Empty: no link."
                ),
                max_length=1024,
                verbose_name="permalink template",
            ),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="git_url",
            field=models.CharField(
                blank=True,
                help_text=(
                    "Empty: a directory root. https://, ssh:// (or user@host:path) or file:// for a local bare "
                    "repository. A user name may be given; a password or token never: use a credential below."
                ),
                max_length=1024,
                verbose_name="git URL",
            ),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="git_webhook_salt",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
    ]
