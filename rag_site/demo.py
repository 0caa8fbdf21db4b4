"""Demo content: skills about rag-site itself, loaded by `make run`."""

from importlib import resources

from sources.models import Skill


def demo_skills_load() -> list[str]:
    """Create the demo skills that do not exist yet; return the new slugs.

    Never overwrites a skill an admin has edited or re-created.
    """
    created = []
    for entry in sorted(resources.files("rag_site").joinpath("demo_skills").iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".md"):
            continue
        slug = entry.name.removesuffix(".md")
        _, was_created = Skill.objects.get_or_create(slug=slug, defaults={"body": entry.read_text(encoding="utf-8")})
        if was_created:
            created.append(slug)
    return created
