from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sources", "0007_fingerprints")]

    operations = [
        migrations.AddField(
            model_name="indexjob",
            name="chunks_queued",
            field=models.PositiveIntegerField(
                default=0, help_text="Chunks of changed files so far (embedded or waiting)."
            ),
        ),
    ]
