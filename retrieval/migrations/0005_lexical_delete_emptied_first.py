"""The lexical index's delete and update triggers: a source generation left without chunks loses its postings by
their key's prefix, other deleted chunks' postings go by their whole key.

Deleting a large root no longer stalls: see _lexical_sql.REMOVE_EMPTIED_FIRST. The
triggers themselves and the index's rows stay as they are; only the two
functions' bodies change.
"""

from django.db import migrations

from retrieval.migrations._lexical_sql import REMOVE_EMPTIED_FIRST, REMOVE_EMPTIED_FIRST_UNDONE


class Migration(migrations.Migration):
    dependencies = [
        ("retrieval", "0004_access_models_moved"),
    ]

    operations = [migrations.RunSQL(REMOVE_EMPTIED_FIRST, REMOVE_EMPTIED_FIRST_UNDONE)]
