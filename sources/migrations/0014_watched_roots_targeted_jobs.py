"""Issue 25 item 2: watched roots (WorkspaceRoot.watch) and targeted jobs (IndexJob.paths)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sources", "0013_uploaded_document")]

    operations = [
        migrations.AddField(
            model_name="workspaceroot",
            name="watch",
            field=models.BooleanField(
                default=True,
                help_text="Index a changed file within seconds: the watcher (RAG_WATCH) queues a job for just the "
                "changed paths. The periodic re-verify still catches what it misses.",
            ),
        ),
        migrations.AddField(
            model_name="indexjob",
            name="paths",
            field=models.JSONField(blank=True, default=list, help_text="Empty: the whole root."),
        ),
    ]
