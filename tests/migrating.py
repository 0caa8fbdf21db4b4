"""Move a test database to a point in its migration history, as an upgrade would meet it."""

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets=None):
    """Migrate to ``targets`` (None: the latest migrations) and return the models as they stand there."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()  # the previous migrate changed what is applied
    targets = targets if targets is not None else executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    # (app, None) unapplies the whole app: it has no state of its own to name.
    return executor.loader.project_state([target for target in targets if target[1] is not None]).apps
