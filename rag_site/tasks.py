"""The shell's own periodic work: the scheduled backup (on the bulk queue, by default routing)."""

import logging

from celery import shared_task

from rag_site.backup.config import backup_config
from rag_site.backup.services import backup_scheduled

log = logging.getLogger(__name__)


@shared_task
def backup_scheduled_task() -> str | None:
    # Not acks_late: a backup cut short by a dead worker is left as a .partial directory and the next one runs at
    # its time; running it again at once would only double the load the death may have come from.
    config = backup_config()
    if not config.hours:
        return None  # the beat entry outlives RAG_BACKUP_HOURS=0 in django-celery-beat's table
    target = backup_scheduled(
        directory=config.directory,
        keep=config.keep,
        database=config.database,
        bin_dir=config.bin_dir,
        documents_dir=config.documents_dir,
    )
    log.info("backup written to %s", target)
    return str(target)
