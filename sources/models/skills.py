"""Skills: markdown with YAML front matter, one source each."""

from django.db import models

from sources.models.base import Indexed, Scoped


class Skill(Scoped, Indexed):
    slug = models.SlugField(max_length=200, unique=True)
    title = models.CharField(
        max_length=255, blank=True, help_text="Empty: taken from front matter or the first heading."
    )
    body = models.TextField(help_text="Markdown, optionally starting with YAML front matter between --- lines.")
    enabled = models.BooleanField(default=True)
    metadata = models.JSONField(default=dict, blank=True, editable=False, help_text="The parsed front matter.")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.title or self.slug
