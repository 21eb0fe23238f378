"""No file of the repository cites a section of a design document readers do not have:
code, tests and docs say the rule in words or link the docs/ page that states it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SIGN = "\N{SECTION SIGN}".encode()
PLACES = ["src", "tests", "docs", "bench", "examples", "tools", "README.md"]
SKIP_DIRS = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache", "node_modules"}

#: Files still being reworded: none (the App's parts and the worker's modules were the last).
#: Nothing may be added to it.
ALLOWED: tuple[str, ...] = ()


def files(root: Path = ROOT) -> list[Path]:
    found: list[Path] = []
    for place in PLACES:
        top = root / place
        if top.is_file():
            found.append(top)
            continue
        for path in top.rglob("*"):
            parts = path.relative_to(root).parts
            # the benchmarks' peer virtualenvs (bench/.venv-peers*, gitignored) are not ours
            if path.is_file() and not SKIP_DIRS & set(parts) and not _venv(parts):
                found.append(path)
    return found


def _venv(parts: tuple[str, ...]) -> bool:
    return any(part.startswith(".venv") for part in parts)


def citing(root: Path = ROOT) -> list[str]:
    """The root-relative names of the scanned files that hold a section sign."""
    names = []
    for path in files(root):
        name = path.relative_to(root).as_posix()
        if not name.startswith(ALLOWED) and SIGN in path.read_bytes():
            names.append(name)
    return sorted(names)


def test_no_file_cites_a_section_of_a_missing_document() -> None:
    assert citing() == []


def test_the_scan_names_a_citation_outside_the_allowed_files(tmp_path: Path) -> None:
    """The check can fail: a section sign anywhere it looks is named, in any kind of file."""
    cite = "see \N{SECTION SIGN}7\n"
    for name in [
        "src/jobtrail/model/a.py",
        "docs/b.md",
        "README.md",
        "bench/c.py",
        "src/jobtrail/app/parts.py",
        "tests/__pycache__/d.pyc",
        "other/e.py",
    ]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(cite, encoding="utf-8")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "clean.py").write_text("# no sign\n", encoding="utf-8")
    assert citing(tmp_path) == [
        "README.md",
        "bench/c.py",
        "docs/b.md",
        "src/jobtrail/app/parts.py",
        "src/jobtrail/model/a.py",
    ]
