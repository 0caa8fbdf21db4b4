class BackupError(Exception):
    """A backup or restore that cannot go on; the message says why and what to do, and nothing was changed."""
