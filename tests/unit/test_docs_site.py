"""The documentation site (mkdocs.yml) covers every page of docs/, is built strictly and loads
nothing from the network, and CI builds it (.ci/run: a broken link, a missing page or anchor
fails there; these checks need no MkDocs installed)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "mkdocs.yml"
PAGES = sorted((ROOT / "docs").glob("*.md"))


def config() -> str:
    """mkdocs.yml without its comments."""
    text = CONFIG.read_text(encoding="utf-8")
    return re.sub(r"(^|\s)#.*$", "", text, flags=re.M)


def block(name: str) -> str:
    """The lines of the top-level YAML key ``name`` (its nested lines, or its ``|`` text)."""
    match = re.search(rf"^{name}:.*\n((?:[ \t]+.*\n|\n)*)", config(), flags=re.M)
    assert match, f"mkdocs.yml has no {name}:"
    return match.group(1)


def nav_pages() -> list[str]:
    return re.findall(r"^\s+- (?:[^:\n]+: )?(\S+\.md)\s*$", block("nav"), flags=re.M)


def test_every_page_of_docs_is_in_the_nav_once() -> None:
    """A new page must be given a place in the nav (or in ``not_in_nav``): the strict build
    fails on an omitted page, and this says which, without building."""
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    listed = nav_pages()
    outside = [
        line.strip().lstrip("/") for line in block("not_in_nav").splitlines() if line.strip()
    ]
    assert len(listed) == len(set(listed)), listed
    assert sorted([*listed, *outside]) == pages
    assert listed[0] == "index.md" and "celery.md" in listed
    assert outside == ["STATUS.md"]


def misindented(text: str) -> list[int]:
    """Lines indented by 1 to 3 spaces that Python-Markdown, which builds the site, reads
    otherwise than GitHub: a nested list item (it nests at 4 spaces only, else the list goes
    flat) and a block after a blank line (a paragraph or a fenced block there ends the list:
    the numbering starts again). Fenced blocks' own lines are not looked at."""
    found = []
    lines = text.splitlines()
    fence: int | None = None
    for number, line in enumerate(lines, start=1):
        body = line.lstrip(" ")
        indent = len(line) - len(body)
        if fence is not None:
            if body.startswith("```") and indent <= fence:
                fence = None
            continue
        if body.startswith("```"):
            fence = indent
        blank_before = number == 1 or not lines[number - 2].strip()
        item = re.match(r"([-*+]|\d+\.) ", body)
        if body and 0 < indent < 4 and (item or blank_before):
            found.append(number)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_list_content_is_indented_four_spaces(page: Path) -> None:
    """GitHub nests at 2 spaces; the site's Markdown needs 4 (which GitHub reads alike)."""
    assert misindented(page.read_text(encoding="utf-8")) == [], page.name


def test_the_indent_check_can_fail() -> None:
    text = "1. step\n\n   ```sh\n   run\n   ```\n\n- a\n  - b\n  lazy line\n\n    - c\n"
    assert misindented(text) == [3, 8]


def test_the_build_is_strict_and_validates_links_and_anchors() -> None:
    text = config()
    assert re.search(r"^strict: true$", text, flags=re.M)
    assert re.search(r"^docs_dir: docs$", text, flags=re.M)
    links = block("validation")
    for check in ("omitted_files", "not_found", "anchors", "unrecognized_links"):
        assert re.search(rf"^\s+{check}: warn$", links, flags=re.M), check
    # the site goes under build/, which git ignores: nothing new at the repository's root
    site = re.search(r"^site_dir: (\S+)$", text, flags=re.M)
    assert site and site.group(1).startswith("build/")
    assert "build/" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_site_fetches_nothing_at_run_time() -> None:
    """Material bundles its assets; what would fetch from another host is off: Google Fonts,
    the repository facts (``repo_url``: a call to GitHub's API per visit), and Mermaid's script
    (a ``mermaid`` custom fence would load it from a CDN)."""
    text = config()
    theme = block("theme")
    assert re.search(r"^\s+name: material$", theme, flags=re.M)
    assert re.search(r"^\s+font: false$", theme, flags=re.M)
    assert not re.search(r"^repo_url:", text, flags=re.M)
    assert "mermaid" not in text
    assert not re.search(r"^\s+- (social|privacy|optimize)\b", block("plugins"), flags=re.M)


def test_ci_builds_the_site_strictly_and_waits_for_it() -> None:
    """.ci/run installs the `docs` extra from the package index, builds the site strictly in
    the background, checks no page loads from another host, and fails with it."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    docs = extras["optional-dependencies"]["docs"]
    assert any(req.startswith("mkdocs-material") for req in docs)
    ci = (ROOT / ".ci" / "run").read_text()
    assert '["optional-dependencies"]["docs"]' in ci
    assert ".venv-docs/bin/mkdocs build --strict" in ci
    assert ">.ci-docs.log 2>&1 &" in ci and "DOCS=$!" in ci
    assert 'if ! wait "$DOCS"; then' in ci and "tail -n 1 .ci-docs.log" in ci
    assert "fonts\\.(googleapis|gstatic)" in ci
    assert ci.index('wait "$DOCS"') < ci.index('echo "CI OK"')
