from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0002_lexical_postings"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="accessgrant",
            options={
                "permissions": [
                    ("view_index_overview", "Can view the index overview in the admin console"),
                    ("use_try_search", "Can use the admin console's try-search"),
                ]
            },
        ),
    ]
