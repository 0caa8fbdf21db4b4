"""The extraction stage: a document's bytes in, markdown-like text and its anchors out. Pure Python, no Django.

Sits between the safe read (sources/walk.py) and chunking: ingest reads a
file's bytes, ``extractor_for`` names the extractor its suffix calls for, and
``sources.extract.sandbox.extract`` runs it in a child process under a time
and memory limit. Each extractor's identity (its name, the library's version
and this module's version of it) joins the file's fingerprint, so upgrading
one parser re-extracts the files it reads and nothing else.
"""

from dataclasses import dataclass
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import PurePosixPath

from sources.extract.types import Anchor, Extracted, ExtractionRefused, Limits


@dataclass(frozen=True, slots=True)
class Extractor:
    kind: str  # "pdf", "docx", ...: what the child process runs
    library: str  # the distribution whose version joins the fingerprint
    revision: int  # bumped when our conversion of that library's output changes
    also: tuple[str, ...] = ()  # other distributions whose output it uses (their versions join the identity too)

    @property
    def identity(self) -> str:
        library = f"{self.library}-{_library_version(self.library)}" if self.library else "stdlib"
        library += "".join(f"+{name}-{_library_version(name)}" for name in self.also)
        return f"{self.kind}:{library}:{self.revision}"


EXTRACTORS = {
    ".pdf": Extractor("pdf", "pypdf", 2, also=("pdfplumber",)),  # 2: ruled tables as markdown tables
    ".docx": Extractor("docx", "python-docx", 1),
    ".pptx": Extractor("pptx", "python-pptx", 1),
    ".xlsx": Extractor("xlsx", "openpyxl", 1),
    ".csv": Extractor("csv", "", 1),
    ".tsv": Extractor("tsv", "", 1),
    ".html": Extractor("html", "", 1),
    ".htm": Extractor("html", "", 1),
}

__all__ = ["EXTRACTORS", "Anchor", "Extracted", "ExtractionRefused", "Extractor", "Limits", "extractor_for"]


def extractor_for(path: str) -> Extractor | None:
    """The extractor a file's suffix calls for; None: the file is text and goes straight to chunking."""
    return EXTRACTORS.get(PurePosixPath(path).suffix.lower())


@cache
def _library_version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "missing"
