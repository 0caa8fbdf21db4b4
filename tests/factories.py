import factory

from sources.models import Skill


class SkillFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Skill

    slug = factory.Sequence(lambda n: f"skill-{n}")
    body = factory.LazyAttribute(lambda o: f"# {o.slug}\n\nSome text about {o.slug}.\n")
