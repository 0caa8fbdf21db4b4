"""Thin receivers: every way a skill is saved (admin, ORM, API) queues indexing."""

from django.db.models.signals import post_save, pre_delete
from django.dispatch import receiver

from sources import services
from sources.models import Skill


@receiver(post_save, sender=Skill, dispatch_uid="skill_saved_index")
def skill_saved(sender, instance: Skill, raw: bool = False, **kwargs) -> None:
    if not raw:
        services.skill_enqueue_index(skill_id=instance.pk)


@receiver(pre_delete, sender=Skill, dispatch_uid="skill_deleted_source")
def skill_deleting(sender, instance: Skill, **kwargs) -> None:
    services.skill_delete_source(skill_id=instance.pk)
