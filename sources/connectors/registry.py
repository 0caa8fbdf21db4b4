"""Which connector indexes a root: the first in ``CONNECTORS`` that claims it. A new kind of root adds its line."""

from sources.config import IndexingConfig
from sources.connectors.base import Connector
from sources.connectors.folder import FolderConnector
from sources.connectors.git import GitConnector
from sources.connectors.web.connector import WebConnector
from sources.models import IndexJob, WorkspaceRoot

# Most specific first; a folder claims every root, so it stays last.
CONNECTORS: tuple[type[Connector], ...] = (WebConnector, GitConnector, FolderConnector)


def connector_for(*, root: WorkspaceRoot, job: IndexJob, config: IndexingConfig) -> Connector:
    kind = next(kind for kind in CONNECTORS if kind.claims(root))
    return kind(root=root, job=job, config=config)
