"""Thin receivers: every way a source is saved (admin, ORM, API) reaches its service."""

import functools

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_delete
from django.dispatch import receiver

from sources import git_roots, memories, services, tasks, tools, uploads
from sources.config import git_config
from sources.models import Memory, Segment, Skill, Source, Tool, UploadedDocument, WorkspaceRoot
from sources.roots import root_sources_sync
from sources.schedules import root_schedule_delete, root_schedule_sync


@receiver(post_save, sender=Skill, dispatch_uid="skill_saved_index")
def skill_saved(sender, instance: Skill, raw: bool = False, **kwargs) -> None:
    if not raw:
        services.skill_source_sync(instance)  # scope and enabled apply at once
        tasks.item_enqueue(kind="skill", pk=instance.pk)


@receiver(pre_delete, sender=Skill, dispatch_uid="skill_deleted_source")
def skill_deleting(sender, instance: Skill, **kwargs) -> None:
    services.skill_delete_source(skill_id=instance.pk)


@receiver(post_save, sender=Tool, dispatch_uid="tool_saved_index")
def tool_saved(sender, instance: Tool, raw: bool = False, **kwargs) -> None:
    if not raw:
        tools.tool_source_sync(instance)  # scope and enabled apply at once
        tasks.item_enqueue(kind="tool", pk=instance.pk)


@receiver(pre_delete, sender=Tool, dispatch_uid="tool_deleted_source")
def tool_deleting(sender, instance: Tool, **kwargs) -> None:
    Source.objects.filter(tool__pk=instance.pk).delete()


@receiver(post_save, sender=UploadedDocument, dispatch_uid="document_saved_index")
def document_saved(sender, instance: UploadedDocument, raw: bool = False, **kwargs) -> None:
    if not raw:
        uploads.document_source_sync(instance)  # scope and enabled apply at once
        tasks.item_enqueue(kind="document", pk=instance.pk)


@receiver(pre_delete, sender=UploadedDocument, dispatch_uid="document_deleted_source")
def document_deleting(sender, instance: UploadedDocument, **kwargs) -> None:
    uploads.document_delete_source(document_id=instance.pk)
    uploads.document_delete_file(instance)


@receiver(post_save, sender=Memory, dispatch_uid="memory_saved_index")
def memory_saved(sender, instance: Memory, raw: bool = False, update_fields=None, **kwargs) -> None:
    if raw:
        return
    memories.memory_source_sync(instance)  # scope, approval, supersession and expiry apply at once
    if update_fields is None or "text" in update_fields:
        tasks.item_enqueue(kind="memory", pk=instance.pk)  # its text may have changed; anything else is the source's


@receiver(pre_delete, sender=Memory, dispatch_uid="memory_deleted_source")
def memory_deleting(sender, instance: Memory, **kwargs) -> None:
    memories.memory_delete_source(memory_id=instance.pk)


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
