"""Git roots: what an index job of a root with a git URL does before the walk, and what it records after.

Every job of a git root fetches first, inside the job (it holds the root's
lock, so no other job checks out meanwhile). Then, from the last indexed
commit ``root.git_commit`` to the branch's new tip:

- the same commit: a fetch job (webhook or schedule) has nothing to do;
- a descendant: the job reads only the paths ``git diff`` names (renames
  keep their vectors, sources/roots.py);
- not a descendant (force-push, gc) or another branch: the root is rebuilt
  in full into a new generation, flipped when complete (blue/green, as a
  model swap does), so search never sees a half-built index.

The checkout under RAG_VAR_DIR/git is a directory like any root's: the
walker, its containment and its reader checks apply unchanged.
"""

import logging
import os
import secrets
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from django.utils.text import slugify

from kernel.errors import ApplicationError
from sources import git, git_credentials
from sources.config import GitConfig
from sources.extract import extractor_for
from sources.extract.html import HTML_SNIFF_BYTES, html_document
from sources.jobs import HandOff
from sources.models import IndexJob, WorkspaceRoot
from sources.queues import GIT_FETCH_TRIGGERS, INTERACTIVE, job_queue

log = logging.getLogger(__name__)

# A job asked for by a webhook or the schedule that finds this many changed paths (or a rewritten history, or a
# document to extract) is handed to the bulk queue: a rebuild there never holds up a save on the interactive one.
MAX_INTERACTIVE_PATHS = 1000
REBUILD_TRIGGER = "git-rebuild"


class GitHandOff(HandOff):
    """The fetch found work for the bulk queue (a rebuild, a big diff); the job is queued there instead."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, trigger=REBUILD_TRIGGER)


@dataclass(slots=True)
class GitPlan:
    """What a git root's job indexes: the commit checked out, and how."""

    commit: str
    branch: str
    nothing: bool = False  # no new commit: nothing to read
    rebuild: bool = False  # history rewritten or branch switched: a new generation, flipped at the end
    renames: dict[str, str] = field(default_factory=dict)  # new path -> old path
    gitlinks: list[str] = field(default_factory=list)  # submodules among what the job reads


def root_git_path(*, name: str, config: GitConfig) -> str:
    """A new checkout directory for a git root (created now: a root's path must exist)."""
    path = Path(config.directory) / f"{slugify(name)[:60] or 'root'}-{secrets.token_hex(4)}"
    path.mkdir(parents=True, exist_ok=False)
    return str(path)


def root_git_forget(*, root: WorkspaceRoot, config: GitConfig) -> None:
    """A deleted git root's checkout and clone, removed from disk; only directories directly below the git
    directory, where ``root_git_path`` made them (a root's path, whatever it says, never leads the removal off)."""
    base = Path(config.directory).resolve()
    for path in (Path(root.path), Path(root_repo(root, config).git_dir)):
        if path.is_dir() and not path.is_symlink() and path.resolve().parent == base:
            shutil.rmtree(path, ignore_errors=True)


def clones_scrub(*, config: GitConfig) -> int:
    """Every clone's remote URLs without tokens or passwords (``git.clone_scrub``), when a worker starts: a root
    that runs no job (disabled, or deleted while its clone stayed) keeps none on disk either. Returns how many
    were cleaned."""
    cleaned = 0
    for git_dir in sorted(Path(config.directory).glob("*.git")):
        try:
            cleaned += git.clone_scrub(str(git_dir))
        except ApplicationError as exc:
            log.warning("%s: %s", git_dir, exc.message)
    if cleaned:
        log.warning("removed a token from the remote URL of %d git clone(s) in %s", cleaned, config.directory)
    return cleaned


def root_remote(root: WorkspaceRoot, config: GitConfig) -> git.Remote:
    """The root's remote with its bound credential read now, once the URL and the credential pass the one check
    (sources/git_credentials.py); else an error that says what to do."""
    if root.git_credential_legacy:
        raise ApplicationError(git_credentials.legacy_advice(url=root.git_url, legacy=root.git_credential_legacy))
    if problems := git_credentials.git_remote_problems(url=root.git_url, credential=root.git_credential, config=config):
        raise ApplicationError("; ".join(problems.values()))
    secret, key_file = "", ""
    if root.git_credential:
        binding = git_credentials.credential_binding(name=root.git_credential, directory=config.credentials_dir)
        secret, key_file = git_credentials.binding_secret(binding)
    return git.Remote(url=root.git_url, branch=root.git_branch or "main", key_file=key_file, secret=secret)


def root_repo(root: WorkspaceRoot, config: GitConfig) -> git.Repo:
    return git.Repo(
        git_dir=os.path.join(config.directory, f"{os.path.basename(root.path)}.git"),
        work_tree=root.path,
        timeout=config.timeout_seconds,
    )


def job_git_prepare(*, root: WorkspaceRoot, job: IndexJob, config: GitConfig) -> GitPlan:
    """Fetch, decide what the job reads (setting ``job.paths`` to the diff), check the new tip out.

    Raises GitHandOff when a fetch job (interactive) finds bulk work, and
    ApplicationError (redacted, also kept on ``root.git_error``) when the
    remote cannot be reached or read.
    """
    try:
        repo = root_repo(root, config)
        # First, even when the root's credential no longer qualifies and the job fails below.
        if git.clone_scrub(repo.git_dir):
            log.warning("git root %s: a token in its clone's remote URL was removed", root.name)
        remote = root_remote(root, config)
        tip = git.repo_fetch(repo, remote)
        on_interactive = job_queue(job) == INTERACTIVE  # where it was sent: before _plan gives it paths
        plan = _plan(root, job, repo, remote, tip)
        if not plan.nothing:
            git.checkout(repo, remote, tip)
            if on_interactive and job.trigger in GIT_FETCH_TRIGGERS and (document := _extracted(root.path, job.paths)):
                # One hostile PDF held the single interactive worker for the full extraction limit (issue 39
                # item 6): whoever can push to the repository would hold it N times over with N of them.
                raise GitHandOff(f"{document} (and any other document) is extracted on the bulk queue")
            links = git.gitlinks(repo, tip)
            wanted = set(job.paths)
            plan.gitlinks = [
                p for p in links if not wanted or p in wanted or any(p.startswith(w + "/") for w in wanted)
            ]
    except ApplicationError as exc:
        message = git.url_redact(exc.message)
        WorkspaceRoot.objects.filter(pk=root.pk).update(git_error=message[:2000])
        raise ApplicationError(f"git root {root.name!r}: {message}") from None
    return plan


def _plan(root: WorkspaceRoot, job: IndexJob, repo: git.Repo, remote: git.Remote, tip: str) -> GitPlan:
    plan = GitPlan(commit=tip, branch=remote.branch)
    old = root.git_commit
    fetch_job = job.trigger in GIT_FETCH_TRIGGERS
    if not old:
        if fetch_job:
            raise GitHandOff("the first index of a git root reads it in full")
        return plan
    if (root.git_indexed_branch and root.git_indexed_branch != remote.branch) or not git.is_ancestor(repo, old, tip):
        why = (
            f"the branch changed ({root.git_indexed_branch} -> {remote.branch})"
            if root.git_indexed_branch != remote.branch
            else f"commit {old[:12]} is no longer in {remote.branch}'s history (force-push or garbage collection)"
        )
        if fetch_job:
            raise GitHandOff(f"{why}: rebuilt in full")
        plan.rebuild = True
        log.info("git root %s: %s; rebuilding into a new generation", root.name, why)
        return plan
    if old == tip:
        # A fetch job with nothing new ends here; an admin's or API's full job re-verifies the checkout as usual.
        plan.nothing = fetch_job and not job.paths
        return plan
    diff = git.diff_read(repo, remote, old, tip)
    plan.renames = diff.renames
    if fetch_job or job.paths:
        paths = sorted({*job.paths, *diff.paths})
        if len(paths) > MAX_INTERACTIVE_PATHS:
            raise GitHandOff(f"{len(paths)} paths changed: read in full")
        # An empty diff (commits that change no file) still checks the tip out and records it.
        job.paths = paths or []
        IndexJob.objects.filter(pk=job.pk).update(paths=job.paths)
        if not paths:
            plan.nothing = True
            git.checkout(repo, remote, tip)
    return plan


def _extracted(checkout: str, paths: list[str]) -> str:
    """The first of ``paths`` in the checkout that the extraction stage would read ("" when none): a PDF, Office or
    CSV file, or an HTML page (a fragment or template is read as text, as sources/roots.py decides)."""
    for path in paths:
        extractor = extractor_for(path)
        if extractor is None:
            continue
        try:
            # Never followed: a symlink is not read as a document by the walk either.
            fd = os.open(os.path.join(checkout, path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # deleted by the push, or a symlink: nothing to extract
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            if extractor.kind != "html" or html_document(os.read(fd, HTML_SNIFF_BYTES)):
                return path
        finally:
            os.close(fd)
    return ""


def root_git_indexed(*, root: WorkspaceRoot, plan: GitPlan) -> None:
    """Record the commit the root's index now reflects (the next fetch diffs from it)."""
    WorkspaceRoot.objects.filter(pk=root.pk).update(
        git_commit=plan.commit, git_indexed_branch=plan.branch, git_error=""
    )


def permalink(template: str, *, commit: str, path: str, start: int, end: int) -> str:
    """The root's permalink template filled in; "" without a template or a commit, or when the template is broken."""
    if not template or not commit:
        return ""
    try:
        return template.format(commit=commit, path=quote(path), start=start, end=end)
    except (KeyError, IndexError, ValueError):
        return ""
