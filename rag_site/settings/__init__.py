"""rag-site settings, read from the environment, by topic (DJANGO_SETTINGS_MODULE=rag_site.settings).

Every variable is declared once in rag_site/settings_registry.py (name, type,
default, bounds, topic, doc) and read here through it; docs/configuration.md's
reference and .env.example are generated from the registry (`make settings-docs`).
Malformed values raise ImproperlyConfigured naming the variable.

The topics are pulled in so that each comes after those it reads: runtime
needs base's TIME_ZONE; llm checks settings of indexing and search.
"""

import os

# Models come from packages or local paths, never from the hub. huggingface_hub
# reads this once, at its first import, so it is set before anything imports it.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Django reads its settings as this module's attributes: each topic's names are re-exported,
# in the order of their dependencies (a topic also imports what it reads, so the order only
# decides which of several bad values is reported first).
# isort: off
from rag_site.settings.base import *  # noqa: E402, F403
from rag_site.settings.runtime import *  # noqa: E402, F403
from rag_site.settings.indexing import *  # noqa: E402, F403
from rag_site.settings.search import *  # noqa: E402, F403
from rag_site.settings.access import *  # noqa: E402, F403
from rag_site.settings.llm import *  # noqa: E402, F403
from rag_site.settings.observability import *  # noqa: E402, F403
# isort: on
