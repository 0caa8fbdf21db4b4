"""The sources app's admin pages, one module per area; importing them registers them."""

from surfaces.admin import documents, memories, roots, skills  # noqa: F401
