"""Git roots: a folder over the root's checkout, with the git plan (sources/git_roots.py) around it.

Before anything is listed, the job fetches and plans: nothing new (the job
ends), a diff (the job's paths become the changed ones; renames keep their
vectors), or a rebuild into a new generation (history rewritten). Every
chunk carries the commit it was read at; submodules are listed as skipped.
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

from kernel.errors import ApplicationError
from sources import git_roots
from sources.connectors.base import Item
from sources.connectors.folder import FolderConnector
from sources.git import SUBMODULE_REASON
from sources.models import COMMIT_KEY, WorkspaceRoot
from sources.walk import Skipped


class GitConnector(FolderConnector):
    kind = "git"
    plan: git_roots.GitPlan

    @classmethod
    def claims(cls, root: WorkspaceRoot) -> bool:
        return root.is_git

    def prepare(self) -> str | None:
        if self.config.git is None:
            raise ApplicationError("this worker has no git configuration (RAG_VAR_DIR)")
        self.plan = git_roots.job_git_prepare(root=self.root, job=self.job, config=self.config.git)
        if self.plan.nothing:
            git_roots.root_git_indexed(root=self.root, plan=self.plan)
            return f"commit {self.plan.commit[:12]} is indexed; no file changed since"
        return None

    @property
    def rebuild(self) -> bool:
        return self.plan.rebuild

    def items(self, *, paths: Sequence[str], known: Mapping[str, str]) -> Iterator[Item | Skipped]:
        metadata = {COMMIT_KEY: self.plan.commit}
        for entry in super().items(paths=paths, known=known):
            yield entry if isinstance(entry, Skipped) else replace(entry, metadata=metadata)
        for link in self.plan.gitlinks:
            yield Skipped(link, SUBMODULE_REASON)

    def renamed_from(self, path: str) -> str | None:
        return self.plan.renames.get(path)

    def indexed(self) -> None:
        git_roots.root_git_indexed(root=self.root, plan=self.plan)

    def summary(self) -> str:
        return f"{'rebuilt at' if self.plan.rebuild else 'at'} {self.plan.commit[:12]}, "
