from django.db.models import Count
from django.shortcuts import get_object_or_404
from ninja import Router

from sources.models import Skill
from sources.schemas import SkillOut

router = Router(tags=["sources"])


def _skills():
    return Skill.objects.annotate(chunk_count=Count("source__chunks"))


def _skill_out(skill: Skill) -> SkillOut:
    return SkillOut(
        slug=skill.slug,
        title=skill.title or (skill.source.title if skill.source_id else "") or skill.slug,
        enabled=skill.enabled,
        index_status=skill.index_status,
        indexed_at=skill.indexed_at,
        last_error=skill.last_error,
        chunks=skill.chunk_count,
    )


@router.get("/skills", response=list[SkillOut])
def skills_list(request):
    """Every skill with its indexing status and, when indexing failed, why."""
    return [_skill_out(skill) for skill in _skills().select_related("source")]


@router.get("/skills/{slug}", response=SkillOut)
def skill_detail(request, slug: str):
    return _skill_out(get_object_or_404(_skills().select_related("source"), slug=slug))
