"""Folders: a root that is a directory on this machine (also a watched one: its watcher queues targeted jobs).

The directory is pinned (sources/roots.py): each job checks it again and
holds one descriptor of it, and every file is listed and read below that
descriptor with O_NOFOLLOW (sources/walk.py), a hard-linked file only when
every link is inside the root (which only a whole walk can tell).
"""

import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from sources.connectors.base import Connector, Item
from sources.models import WorkspaceRoot, words
from sources.roots import root_directory_check
from sources.walk import Candidate, Skipped, WalkRules, read_bytes, walk, walk_paths


class FolderConnector(Connector):
    kind = "folder"

    @classmethod
    def claims(cls, root: WorkspaceRoot) -> bool:
        return True  # the last in the registry: what no other connector claims is a folder

    def open(self) -> None:
        root = self.root
        self.rules = WalkRules(
            include=tuple(words(root.include_globs)),
            exclude_dirs=frozenset(words(root.exclude_dirs)),
            max_file_bytes=root.max_file_bytes,
            deny=tuple(words(root.deny_patterns)),
            index_hidden=root.index_hidden,
            scan_secrets=root.scan_secrets,
            hard_links_inside=root.hard_links_inside,
            max_document_bytes=self.config.max_document_bytes,
        )
        self.counted: Counter[str] = Counter()
        self.root_fd = root_directory_check(root=root)

    def close(self) -> None:
        if getattr(self, "root_fd", -1) >= 0:
            os.close(self.root_fd)
            self.root_fd = -1

    def targeted(self) -> bool:
        # Whether every link of a file is inside the root is known only after the whole walk.
        return not self.root.hard_links_inside

    def items(self, *, paths: Sequence[str], known: Mapping[str, str]) -> Iterator[Item | Skipped]:
        if paths:
            listing = walk_paths(self.root_fd, self.rules, list(paths), self.counted)
        else:
            listing = walk(self.root_fd, self.rules, self.counted)
        for entry in listing:
            if isinstance(entry, Skipped):
                yield entry
            else:
                yield Item(entry.path, entry.size, entry.mtime_ns, handle=entry)

    def left_out(self) -> Mapping[str, int]:
        return self.counted

    def read(self, item: Item) -> bytes | Skipped:
        assert isinstance(item.handle, Candidate)
        return read_bytes(self.root_fd, item.handle, self.rules)
