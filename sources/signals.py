"""Thin receivers: every way a source is saved (admin, ORM, API) reaches its service."""

import functools

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_delete
from django.dispatch import receiver

from sources import git_roots, tasks
from sources.config import git_config
from sources.items import ITEM_KINDS, ITEM_KINDS_BY_MODEL
from sources.models import Segment, WorkspaceRoot
from sources.roots import root_sources_sync
from sources.schedules import root_schedule_delete, root_schedule_sync


def item_saved(sender, instance, raw: bool = False, update_fields=None, **kwargs) -> None:
    """Any item kind's row saved (sources/items.py): its source now, its indexing queued if what it indexes changed."""
    if raw:
        return
    kind = ITEM_KINDS_BY_MODEL[sender]
    kind.source_sync(instance)  # scope and enabled apply at once
    if kind.reindexes(None if update_fields is None else frozenset(update_fields)):
        tasks.item_enqueue(kind=kind.name, pk=instance.pk)


def item_deleting(sender, instance, **kwargs) -> None:
    ITEM_KINDS_BY_MODEL[sender].deleting(instance)


for _kind in ITEM_KINDS.values():
    post_save.connect(item_saved, sender=_kind.model, dispatch_uid=f"{_kind.name}_saved_index")
    pre_delete.connect(item_deleting, sender=_kind.model, dispatch_uid=f"{_kind.name}_deleted_source")


@receiver(post_save, sender=WorkspaceRoot, dispatch_uid="root_saved")
def root_saved(sender, instance: WorkspaceRoot, raw: bool = False, **kwargs) -> None:
    # Scope and enabled apply to search at once, without waiting for a job.
    if not raw:
        root_sources_sync(root=instance)
        root_schedule_sync(root=instance)


@receiver(pre_delete, sender=WorkspaceRoot, dispatch_uid="root_deleting")
def root_deleting(sender, instance: WorkspaceRoot, **kwargs) -> None:
    # Its sources (and their chunks and files) go by cascade: each one's Source.root is this root.
    root_schedule_delete(root_id=instance.pk)
    if instance.git_url:
        # Its clone and checkout go once the deletion is committed (a rolled-back delete keeps a working root).
        transaction.on_commit(functools.partial(git_roots.root_git_forget, root=instance, config=git_config()))


@receiver(post_save, sender=Segment, dispatch_uid="segment_saved")
@receiver(post_delete, sender=Segment, dispatch_uid="segment_deleted")
def segment_changed(sender, instance: Segment, raw: bool = False, **kwargs) -> None:
    if _root_deleting(kwargs.get("origin")):
        return  # the root's deletion takes its segments along: syncing would recreate sources of a root being deleted
    root = WorkspaceRoot.objects.filter(pk=instance.root_id).first()
    if raw or root is None:
        return
    # Files change segment (and scope) now; a job then embeds those whose new
    # segment reads another model. Not forced: every other file stays as it is.
    if root_sources_sync(root=root) and root.enabled:
        tasks.root_reindex_request(root_id=root.pk, ignore_cooldown=True, trigger="segments")


def _root_deleting(origin: object) -> bool:
    # A deletion's origin: the instance or queryset delete() was called on.
    return isinstance(origin, WorkspaceRoot) or getattr(origin, "model", None) is WorkspaceRoot
