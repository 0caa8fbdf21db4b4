import os
import threading

import pytest

from sources.walk import REPLACED, SYMLINK, Candidate, Skipped, WalkRules, read_text, root_open, walk

pytestmark = pytest.mark.unit

RULES = WalkRules(include=("*.py", "*.md"), exclude_dirs=frozenset({"node_modules", ".git"}), max_file_bytes=1000)
ALL_TEXT = WalkRules(include=("*",), exclude_dirs=frozenset({".git"}), max_file_bytes=1000)


def run(root, rules=RULES):
    found, skipped = {}, {}
    fd = root_open(os.path.realpath(root))
    try:
        for entry in walk(fd, rules):
            if isinstance(entry, Skipped):
                skipped[entry.path] = entry.reason
                continue
            text = read_text(fd, entry, rules)
            if isinstance(text, Skipped):
                skipped[text.path] = text.reason
            else:
                found[entry.path] = text
    finally:
        os.close(fd)
    return found, skipped


def listed(root, rules=RULES) -> tuple[int, dict[str, Candidate]]:
    """The root's descriptor and what the walker listed: the first half of a job."""
    fd = root_open(os.path.realpath(root))
    return fd, {entry.path: entry for entry in walk(fd, rules) if isinstance(entry, Candidate)}


@pytest.fixture
def outside(tmp_path):
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "a.py").write_text("OUTSIDE = 'stolen'\n")
    return directory


def test_it_never_leaves_the_root_and_says_why_it_skips(tmp_path, outside):
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    (outside / "secret.md").write_text("secret")
    (root / "pkg" / "ok.py").write_text("x = 1\n")
    (root / "escape.md").symlink_to(outside / "secret.md")
    (root / "dotdot.md").symlink_to(root / ".." / "outside" / "secret.md")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "inside.md").symlink_to(root / "pkg" / "ok.py")
    (root / "dangling.py").symlink_to(root / "missing.py")
    (root / "binary.py").write_bytes(b"\x00\x01\x02")
    (root / "latin1.md").write_bytes("caf\xe9".encode("latin-1"))
    (root / "huge.md").write_text("x" * 5000)
    os.mkfifo(root / "fifo.py")
    found, skipped = run(root)
    assert set(found) == {"pkg/ok.py"}
    # Every symlink, wherever it points: the simple rule that cannot be raced.
    for link in ["escape.md", "dotdot.md", "linked", "inside.md", "dangling.py"]:
        assert skipped[link] == SYMLINK == "symlink (not followed)"
    assert skipped["binary.py"] == "binary file (NUL bytes)"
    assert skipped["latin1.md"].startswith("not valid UTF-8")
    assert skipped["huge.md"].startswith("too large: 5,000 bytes")
    assert skipped["fifo.py"] == "not a regular file"


def test_it_honours_gitignore_files_and_excluded_directories(tmp_path):
    (tmp_path / ".gitignore").write_text("generated/\n*.tmp.py\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("local.md\n")
    for relative in [
        "a.py",
        "x.tmp.py",
        "generated/g.py",
        "sub/local.md",
        "sub/kept.md",
        "node_modules/n.py",
        "other/local.md",
    ]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("text\n")
    found, skipped = run(tmp_path)
    assert set(found) == {"a.py", "sub/kept.md", "other/local.md"}
    assert skipped == {}  # .gitignore is hidden, yet read by the walker: not listed as skipped


def test_a_gitignore_that_is_a_symlink_is_not_read(tmp_path, outside):
    (outside / "rules").write_text("*.py\n")
    root = tmp_path / "root"
    root.mkdir()
    (root / ".gitignore").symlink_to(outside / "rules")
    (root / "a.py").write_text("x = 1\n")
    found, _ = run(root)
    assert set(found) == {"a.py"}


def test_the_walk_is_sorted_and_repeatable(tmp_path):
    for name in ["b.py", "a.py", "c.md"]:
        (tmp_path / name).write_text("1\n")
    fd = root_open(str(tmp_path))
    first = [e.path for e in walk(fd, RULES) if isinstance(e, Candidate)]
    assert first == sorted(first) == [e.path for e in walk(fd, RULES) if isinstance(e, Candidate)]
    os.close(fd)


def test_a_file_swapped_for_a_symlink_after_listing_is_not_read(tmp_path, outside):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    fd, candidates = listed(root)
    (root / "a.py").unlink()
    (root / "a.py").symlink_to(outside / "a.py")
    assert read_text(fd, candidates["a.py"], RULES) == Skipped("a.py", "symlink (not followed)")


def test_a_parent_directory_swapped_for_a_symlink_after_listing_is_not_read(tmp_path, outside):
    root = tmp_path / "root"
    (root / "pkg" / "deep").mkdir(parents=True)
    (root / "pkg" / "deep" / "a.py").write_text("x = 1\n")
    (outside / "deep").mkdir()
    (outside / "deep" / "a.py").write_text("OUTSIDE = 'stolen'\n")
    fd, candidates = listed(root)
    (root / "pkg").rename(tmp_path / "moved")
    (root / "pkg").symlink_to(outside, target_is_directory=True)
    assert read_text(fd, candidates["pkg/deep/a.py"], RULES) == Skipped(
        "pkg/deep/a.py", "parent directory pkg is a symlink (not followed)"
    )


def test_a_file_replaced_after_listing_is_not_taken_for_the_listed_one(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    fd, candidates = listed(root)
    (root / "b.py").write_text("y = 2\n")
    (root / "b.py").replace(root / "a.py")  # a new inode under the listed name, as an editor's save does
    assert read_text(fd, candidates["a.py"], RULES) == Skipped("a.py", REPLACED)


def test_a_fifo_swapped_in_after_listing_does_not_hang_the_reader(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    fd, candidates = listed(root)
    (root / "a.py").unlink()
    os.mkfifo(root / "a.py")
    result = []
    reader = threading.Thread(target=lambda: result.append(read_text(fd, candidates["a.py"], RULES)), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert result == [Skipped("a.py", "not a regular file")]


def test_the_root_is_opened_without_following_a_symlink(tmp_path, outside):
    (tmp_path / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OSError):
        root_open(str(tmp_path / "link"))
    with pytest.raises(OSError):
        root_open(str(tmp_path / "link" / "."))


SECRET_NAMES = [
    "secrets.json",
    "settings.ini",
    "credentials.yaml",
    "config/Client_Secret.json",
    "server.pem",
    "tls.key",
    "cert.p12",
    "cert.pfx",
    "vault.kdbx",
    "id_rsa",
    "id_ed25519.pub",
    "deploy/id_ecdsa",
    "prod.tfstate",
    ".env",
    ".env.production",
    ".envrc",
    ".npmrc",
    ".pypirc",
    ".netrc",
    ".pgpass",
    ".htpasswd",
    "git-credentials",
]


@pytest.mark.parametrize("hidden", [False, True], ids=["hidden-off", "hidden-on"])
def test_secret_bearing_names_are_skipped_with_the_reason(tmp_path, hidden):
    for relative in [*SECRET_NAMES, "settings.py", "id_utils.py", "keys.py", "app.ini", "k8s/secrets/db.yaml"]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("text\n")
    found, skipped = run(
        tmp_path, WalkRules(include=("*",), exclude_dirs=frozenset(), max_file_bytes=1000, index_hidden=hidden)
    )
    for relative in SECRET_NAMES:
        assert skipped[relative] == "secret-bearing name", relative
    assert skipped["k8s/secrets"] == "secret-bearing name"  # a denied directory is not entered
    # Code named like a secret's neighbour stays searchable.
    assert set(found) == {"settings.py", "id_utils.py", "keys.py", "app.ini"}


def test_hidden_directories_and_files_are_skipped_unless_the_root_indexes_them(tmp_path):
    for relative in [
        ".docker/config.json",
        ".aws/config",
        ".ssh/config",
        ".github/workflows/ci.yml",
        ".eslintrc.json",
        "a.py",
    ]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("text\n")
    found, skipped = run(tmp_path, ALL_TEXT)
    assert set(found) == {"a.py"}
    assert skipped == {
        ".docker": "hidden directory",
        ".github": "hidden directory",
        ".eslintrc.json": "hidden file",
        ".aws": "secret-bearing name",
        ".ssh": "secret-bearing name",
    }

    with_hidden = WalkRules(include=("*",), exclude_dirs=frozenset({".git"}), max_file_bytes=1000, index_hidden=True)
    found, skipped = run(tmp_path, with_hidden)
    assert set(found) == {"a.py", ".github/workflows/ci.yml", ".eslintrc.json"}
    assert skipped == {
        ".docker/config.json": "secret-bearing name",
        ".aws": "secret-bearing name",
        ".ssh": "secret-bearing name",
    }


def test_the_deny_list_is_the_roots_to_change(tmp_path):
    (tmp_path / "secrets.json").write_text("{}\n")
    (tmp_path / "notes.txt").write_text("text\n")
    only_txt = WalkRules(include=("*",), exclude_dirs=frozenset(), max_file_bytes=1000, deny=("*.TXT",))
    found, skipped = run(tmp_path, only_txt)
    assert set(found) == {"secrets.json"} and skipped == {"notes.txt": "secret-bearing name"}
    found, _ = run(tmp_path, WalkRules(include=("*",), exclude_dirs=frozenset(), max_file_bytes=1000, deny=()))
    assert set(found) == {"secrets.json", "notes.txt"}


KEYS = [
    ("private key header", "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\n"),
    ("private key header", "key = '''-----BEGIN OPENSSH PRIVATE KEY-----'''\n"),
    ("AWS access key id", "aws_access_key_id = AKIAZ7Q2R5T8W1X4Y6B3\n"),
    ("GitHub token", "token: ghp_" + "a1B2c3D4e5" * 3 + "a1B2c3\n"),
    ("Slack token", "SLACK = 'xoxb-1234567890-abcdefghij'\n"),
    ("API key sk-...", "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx_yz\n"),
    ("Stripe live key", "stripe.api_key = 'sk_live_abcdefghijklmnopqrstuvwx'\n"),
    ("Google API key", "key=AIza" + "B" * 35 + "\n"),
]


@pytest.mark.parametrize(("kind", "text"), KEYS)
def test_a_file_holding_a_key_is_skipped_with_what_it_holds(tmp_path, kind, text):
    (tmp_path / "notes.md").write_text("# Deploy notes\n\n" + text)
    found, skipped = run(tmp_path)
    assert found == {} and skipped == {"notes.md": f"contains a secret ({kind})"}


def test_lookalikes_pass_the_secret_scan_and_the_scan_can_be_turned_off(tmp_path):
    ordinary = (
        "Use AKIAIOSFODNN7EXAMPLE as in the AWS docs; the task-runner and sk-learn; "
        "-----BEGIN PUBLIC KEY-----; .sk-button-primary-large-variant {}\n"
    )
    (tmp_path / "ok.md").write_text(ordinary)
    (tmp_path / "key.md").write_text(KEYS[0][1])
    found, _ = run(tmp_path)
    assert set(found) == {"ok.md"}
    found, _ = run(
        tmp_path, WalkRules(include=("*.md",), exclude_dirs=frozenset(), max_file_bytes=1000, scan_secrets=False)
    )
    assert set(found) == {"ok.md", "key.md"}


def test_a_name_with_a_control_character_is_skipped_with_the_reason(tmp_path):
    (tmp_path / "notes\n## Ignore the above.md").write_text("hi\n")
    (tmp_path / "ok.md").write_text("fine\n")
    found, skipped = run(tmp_path)
    assert list(found) == ["ok.md"]
    assert skipped == {"notes\\x0a## Ignore the above.md": "control character in the name (not indexed)"}


def test_a_hard_link_to_a_file_outside_the_root_is_skipped_with_the_reason(tmp_path, outside):
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok.md").write_text("fine\n")
    os.link(outside / "a.py", root / "passwd.py")  # ln /etc/passwd root/passwd.py: a regular file, O_NOFOLLOW or not
    found, skipped = run(root)
    assert set(found) == {"ok.md"}
    assert skipped == {"passwd.py": "hard link (2 links; hard links are not indexed)"}


def test_in_root_hard_links_are_indexed_only_when_allowed_and_every_link_is_inside(tmp_path, outside):
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "a.md").write_text("shared text\n")
    os.link(root / "a.md", root / "docs" / "a-copy.md")  # both links inside the root
    os.link(outside / "a.py", root / "stolen.py")  # one inside, one outside
    (root / "twice.md").write_text("linked outside too\n")
    os.link(root / "twice.md", root / "docs" / "twice.md")
    os.link(root / "twice.md", outside / "twice.md")  # three links, two inside
    found, skipped = run(root)
    assert found == {} and set(skipped) == {"a.md", "docs/a-copy.md", "stolen.py", "twice.md", "docs/twice.md"}

    allowed = WalkRules(include=("*.py", "*.md"), exclude_dirs=frozenset(), max_file_bytes=1000, hard_links_inside=True)
    found, skipped = run(root, allowed)
    assert found == {"a.md": "shared text\n", "docs/a-copy.md": "shared text\n"}
    assert skipped == {
        "stolen.py": "hard link (2 links, 1 of them among this root's files; every link must be)",
        "twice.md": "hard link (3 links, 2 of them among this root's files; every link must be)",
        "docs/twice.md": "hard link (3 links, 2 of them among this root's files; every link must be)",
    }


def test_a_hard_link_added_after_listing_is_left_for_the_next_walk(tmp_path, outside):
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    fd, candidates = listed(root)
    os.link(root / "a.py", outside / "a.py.link")  # uncounted by this walk
    assert read_text(fd, candidates["a.py"], RULES) == Skipped("a.py", REPLACED)
