"""Issue 22, findings 2 and 3: a root is pinned to its directory (device and inode), and hard links are a root setting.

Existing roots start unpinned: their next job pins the directory it finds
(after refusing a path that passes through a symlink).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0009_contextual_descriptions_api_embeddings"),
    ]

    operations = [
        migrations.AddField(
            model_name="workspaceroot",
            name="hard_links_inside",
            field=models.BooleanField(
                default=False,
                help_text=(
                    "Index a file with several hard links when every link is one of this root's files (checked by "
                    "device and inode at each job). Off: every hard-linked file is skipped, since another link may sit "
                    "outside the root (ln /etc/passwd docs/passwd.txt)."
                ),
                verbose_name="allow hard links inside the root",
            ),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="directory_identity",
            field=models.CharField(
                blank=True,
                editable=False,
                help_text=(
                    '"device:inode" of the directory the path led to when it was pinned; empty: pinned by the next job.'
                ),
                max_length=64,
            ),
        ),
        migrations.AddField(
            model_name="workspaceroot",
            name="symlink_target",
            field=models.CharField(
                blank=True,
                editable=False,
                help_text=(
                    "Where the path led when an admin confirmed a path that passes through a symlink; empty: the path "
                    "must pass through none."
                ),
                max_length=1024,
            ),
        ),
    ]
