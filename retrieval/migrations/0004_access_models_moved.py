"""ApiKey and AccessGrant are the access app's now (access 0001): the retrieval app forgets them, tables kept."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0003_console_permissions"),
        ("access", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name="apikey",
                    name="created_by",
                ),
                migrations.DeleteModel(
                    name="AccessGrant",
                ),
                migrations.DeleteModel(
                    name="ApiKey",
                ),
            ],
            database_operations=[],  # the tables are the access app's now
        ),
    ]
