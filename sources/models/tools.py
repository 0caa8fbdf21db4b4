"""Tools: JSON function schemas, one searchable chunk each."""

from django.db import models

from sources.models.base import Indexed, Scoped


class Tool(Scoped, Indexed):
    key = models.CharField(max_length=300, unique=True, editable=False, help_text="local:{name} or mcp:{server}:{name}")
    name = models.CharField(max_length=200)
    server = models.CharField(max_length=200, blank=True, help_text="MCP server name; empty for a local tool.")
    description = models.TextField(blank=True)
    parameters = models.JSONField(
        default=dict, blank=True, help_text="JSON Schema of the arguments (an object schema)."
    )
    enabled = models.BooleanField(default=True)

    class Meta:
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key

    def save(self, *args, **kwargs) -> None:
        # The key is derived, so it can never disagree with name and server.
        self.key = f"mcp:{self.server}:{self.name}" if self.server else f"local:{self.name}"
        super().save(*args, **kwargs)

    @property
    def openai_schema(self) -> dict:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters or {"type": "object", "properties": {}},
            },
        }
