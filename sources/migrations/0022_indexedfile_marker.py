"""Issue 40: a connector's change marker on each indexed item, where a stat is not one (a page's ETag).

Numbered after the chunker versions' 0021 on another branch; depends on 0020 until they are merged.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("sources", "0021_chunker_versions")]

    operations = [
        migrations.AddField(model_name="indexedfile", name="marker", field=models.TextField(blank=True, default="")),
    ]
