"""README.md and docs/*.md: every relative link reaches an existing file (and heading), and no
page cites a section of a document the repository does not have (a section sign)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (an underscore is not
    punctuation: `enqueue_many` gives #enqueue_many), spaces to dashes."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, flags=re.M)}


def links(page: Path) -> list[str]:
    return LINK.findall(prose(page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(page: Path) -> None:
    broken = []
    for target in links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == [], f"{page.relative_to(ROOT)}: {broken}"


def repository() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return str(project["urls"]["Repository"]).rstrip("/")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_into_the_repository_reach_its_files(page: Path) -> None:
    """A page links a file outside docs/ absolutely (the site has only docs/); the file (and
    heading) must be in this checkout."""
    inside = re.compile(re.escape(repository()) + r"/(?:blob|tree)/main/([^#]*)(?:#(.*))?$")
    broken = []
    for target in links(page):
        match = inside.match(target)
        if not match:
            continue
        path, anchor = ROOT / match.group(1), match.group(2)
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading #{anchor}")
    assert broken == [], f"{page.relative_to(ROOT)}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_reference_to_a_missing_spec(page: Path) -> None:
    assert "\N{SECTION SIGN}" not in page.read_text(encoding="utf-8")


def test_the_checker_sees_links() -> None:
    page = "see [a](docs/a.md#x), ![img](i.png), `[no](code.md)`, [web](https://x.org)"
    assert LINK.findall(prose(page)) == ["docs/a.md#x", "https://x.org"]
    assert slug("Retries and their `defaults`!") == "retries-and-their-defaults"
    assert slug("`enqueue_many`") == "enqueue_many"
