import os

from sources.walk import Candidate, Skipped, WalkRules, read_text, walk

RULES = WalkRules(include=("*.py", "*.md"), exclude_dirs=frozenset({"node_modules", ".git"}), max_file_bytes=1000)


def run(root):
    found, skipped = {}, {}
    for entry in walk(str(root), RULES):
        if isinstance(entry, Skipped):
            skipped[entry.path] = entry.reason
            continue
        text = read_text(entry, RULES.max_file_bytes)
        if isinstance(text, Skipped):
            skipped[text.path] = text.reason
        else:
            found[entry.path] = text
    return found, skipped


def test_it_never_leaves_the_root_and_says_why_it_skips(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "pkg").mkdir(parents=True)
    outside.mkdir()
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
    assert set(found) == {"pkg/ok.py", "inside.md"}
    assert skipped["escape.md"] == skipped["dotdot.md"] == "symlink points outside the root"
    assert skipped["linked"] == "symlinked directory (not followed)"
    assert skipped["dangling.py"].startswith("cannot stat")
    assert skipped["binary.py"] == "binary file (NUL bytes)"
    assert skipped["latin1.md"].startswith("not valid UTF-8")
    assert skipped["huge.md"].startswith("too large: 5,000 bytes")
    assert skipped["fifo.py"] == "not a regular file"


def test_it_honours_gitignore_files_and_excluded_directories(tmp_path):
    (tmp_path / ".gitignore").write_text("generated/\n*.tmp.py\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".gitignore").write_text("local.md\n")
    for relative in ["a.py", "x.tmp.py", "generated/g.py", "sub/local.md", "sub/kept.md", "node_modules/n.py", "other/local.md"]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("text\n")
    found, _ = run(tmp_path)
    assert set(found) == {"a.py", "sub/kept.md", "other/local.md"}


def test_the_walk_is_sorted_and_repeatable(tmp_path):
    for name in ["b.py", "a.py", "c.md"]:
        (tmp_path / name).write_text("1\n")
    first = [e.path for e in walk(str(tmp_path), RULES) if isinstance(e, Candidate)]
    assert first == sorted(first) == [e.path for e in walk(str(tmp_path), RULES) if isinstance(e, Candidate)]
