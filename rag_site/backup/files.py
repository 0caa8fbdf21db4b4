"""A backup's files: kept from other users' eyes, and copied without following a link.

The dump holds every key's hash, every account's password hash and every
source: a backup is its owner's alone (directories 0700, files 0600, whatever
the umask). A backup's documents are plain files in plain directories; a
restore refuses anything else, and no copy here ever follows a link.
"""

import logging
import os
import shutil
import stat
from pathlib import Path

from rag_site.backup.errors import BackupError

log = logging.getLogger(__name__)

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def documents_check(directory: Path) -> None:
    """Refuse a backup whose documents/ holds anything but directories and regular files.

    rag_backup copies regular files only; a symbolic link (or a device, a
    socket) there was put by someone else, and copying it would copy what it
    points to: a tampered backup's link to /etc copied all of /etc.
    """
    try:
        mode = os.lstat(directory).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(mode):
        raise BackupError(_not_plain(directory, mode))
    for parent, dirnames, filenames in os.walk(directory):  # never follows a link (followlinks=False)
        for name in dirnames + filenames:
            path = Path(parent) / name
            mode = os.lstat(path).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise BackupError(_not_plain(path, mode))


def _not_plain(path: Path, mode: int) -> str:
    what = "a symbolic link" if stat.S_ISLNK(mode) else "neither a file nor a directory"
    return (
        f"{path} is {what}: a backup's documents are plain files and directories, so this one was altered; "
        "nothing was restored"
    )


def tree_copy(source: Path, target: Path) -> list[str]:
    """Copy the regular files under ``source`` into ``target`` (merged into what is there); returns their relative
    paths.

    Never follows a link: a link, or anything else that is not a plain file
    or directory, is skipped with a warning (a restore refused them already,
    in ``documents_check``). Contents only: each copy gets the mode new
    files get here, not the source's.
    """
    copied = []
    for parent, dirnames, filenames in os.walk(source):
        here = Path(parent)
        into = target / here.relative_to(source)
        into.mkdir(parents=True, exist_ok=True)
        for name in list(dirnames):
            if not stat.S_ISDIR(os.lstat(here / name).st_mode):
                dirnames.remove(name)
                log.warning("not copied, not a plain directory: %s", here / name)
        for name in filenames:
            path = here / name
            if not stat.S_ISREG(os.lstat(path).st_mode):
                log.warning("not copied, not a plain file: %s", path)
                continue
            shutil.copyfile(path, into / name, follow_symlinks=False)
            copied.append(str((into / name).relative_to(target)))
    return sorted(copied)


def tree_private(directory: Path) -> None:
    """Owner only: directories 0700, files 0600 (pg_dump and the copies were written under the umask)."""
    directory.chmod(PRIVATE_DIR)
    for parent, dirnames, filenames in os.walk(directory):
        for name in dirnames:
            (Path(parent) / name).chmod(PRIVATE_DIR)
        for name in filenames:
            (Path(parent) / name).chmod(PRIVATE_FILE)
