"""The string catalog (``jobtrail.model.i18n``, issue 17 item 6): every entry in every language with
the same placeholders, every key the code and the templates use exists, and no English text
in a dashboard template bypasses the catalog."""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from jobtrail.model import i18n

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "jobtrail"
TEMPLATES = sorted((SRC / "web" / "dashboard" / "templates").glob("*.html"))
assert TEMPLATES, "the dashboard templates moved: point TEMPLATES at them"
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)
# what may stay as it is in every language: the product, codes shown as codes, symbols
ALLOWED = {"jobtrail", "replayed", "jobtrail explain", "p50", "p95"}
CHECKED_ATTRS = {"placeholder", "title", "aria-label", "alt", "label"}


def test_every_entry_has_every_language_with_the_same_placeholders() -> None:
    assert i18n.LANGUAGES == ("en", "zh")
    for key, entry in i18n.MESSAGES.items():
        assert set(entry) == set(i18n.LANGUAGES), key
        assert all(entry[lang].strip() for lang in i18n.LANGUAGES), key
        assert i18n.fields(entry["en"]) == i18n.fields(entry["zh"]), key


def test_a_missing_key_or_language_is_an_error_not_english() -> None:
    with pytest.raises(KeyError):
        i18n.t("no.such.key", "en")
    with pytest.raises(KeyError):
        i18n.t("nav.tasks", "fr")
    assert i18n.t("nav.tasks", "zh") == "任务"
    assert i18n.t("task.title", "zh", id="7") == "任务 7"


def _used_keys() -> dict[str, set[str]]:
    """Every literal key passed to ``t(...)`` / ``i18n.t(...)`` / ``_t(...)`` in the package's
    Python files and templates (a key built at run time is listed by its prefix below)."""
    used: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        if path.name == "i18n.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            first = node.args[0]
            if name in ("t", "_t", "tr") and isinstance(first, ast.Constant):
                used.setdefault(str(first.value), set()).add(str(path.relative_to(ROOT)))
    for path in TEMPLATES:
        for key in re.findall(r"\bt\('([^']+)'\s*[,)]", path.read_text(encoding="utf-8")):
            used.setdefault(key, set()).add(str(path.relative_to(ROOT)))
    return used


def test_every_key_the_code_uses_is_in_the_catalog() -> None:
    used = _used_keys()
    assert len(used) > 100
    missing = {key: sorted(where) for key, where in used.items() if key not in i18n.MESSAGES}
    assert not missing, missing


def test_the_catalog_has_no_dead_entries() -> None:
    used = set(_used_keys())
    for path in SRC.rglob("*.py"):  # keys listed in a table (``cli_format.TASK_HEADERS``)
        if path.name != "i18n.py":
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and node.value in i18n.MESSAGES:
                    used.add(str(node.value))
    dynamic = ("lang.", "queues.outcome_")  # t('lang.' + other_lang), t('queues.outcome_' + done)
    unused = [k for k in i18n.MESSAGES if k not in used and not k.startswith(dynamic)]
    assert not unused, unused


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self._skip += 1
        for name, value in attrs:
            if name in CHECKED_ATTRS and value:
                self.found.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.found.append(data)


def bare_english(source: str) -> list[str]:
    """Text nodes and people-facing attributes of a template with a Latin word left once every
    ``{{ }}``, ``{% %}`` and ``{# #}`` is taken out (the catalog's look-ups are all inside)."""
    parser = _Text()
    parser.feed(JINJA.sub("\x00", source))
    bad = []
    for text in parser.found:
        for piece in text.split("\x00"):
            piece = piece.strip(" \t\n·:–—()«»")
            if re.search(r"[A-Za-z]{2,}", piece) and piece not in ALLOWED:
                bad.append(piece)
    return bad


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_templates_have_no_bare_english(template: Path) -> None:
    assert bare_english(template.read_text(encoding="utf-8")) == []


def test_the_template_check_finds_english() -> None:
    sample = '<h1>Tasks {{ n }}</h1><input placeholder="why"><p>{{ t("x") }} · jobtrail</p>'
    assert bare_english(sample) == ["Tasks", "why"]


def test_jinja_literals_are_not_english_either() -> None:
    """A string literal inside ``{{ }}`` shown as text (``{{ 'Resume' if ... }}``) bypasses the
    catalog too: the only quoted Latin words left in expressions are codes and names."""
    codes = {
        "on",
        "en",
        "zh",
        "resume",
        "pause",
        "pending",
        "dead",
        "intent",
        "refused",
        "reason",
        "lang.",
    }
    codes |= {"selected", "tasks", "task", "queues", "cron", "paused", "resumed", "queues.outcome_"}
    codes |= {"workers", "cancel", "danger", "yes", "no"}
    codes |= {"resume-btn", "pause-btn danger", "\\n", ", ", " · "}
    for path in TEMPLATES:
        for expr in re.findall(r"\{\{(.*?)\}\}|\{%(.*?)%\}", path.read_text(encoding="utf-8")):
            text = "".join(expr)
            text = re.sub(r"\bt\('[^']+'", "", text)
            for literal in re.findall(r"'([^']*)'", text):
                if re.search(r"[A-Za-z]{2,}", literal):
                    assert literal in codes or literal.endswith(".html"), (path.name, literal)


def test_accept_language_and_the_choice() -> None:
    assert i18n.from_accept_language("zh-CN,zh;q=0.9,en;q=0.8") == "zh"
    assert i18n.from_accept_language("en-US,en;q=0.9,zh;q=0.8") == "en"
    assert i18n.from_accept_language("fr, zh;q=0.5") == "zh"
    assert i18n.from_accept_language("zh;q=0, en;q=0.1") == "en"
    assert i18n.from_accept_language("fr") is None
    assert i18n.from_accept_language(None) is None
    assert i18n.from_accept_language("zh;q=abc, en") == "en"
    assert i18n.pick(None, None, None) == "en"
    assert i18n.pick(None, "zh", "en") == "zh"
    assert i18n.pick("en", "zh", "zh") == "en"
    assert i18n.pick(None, "xx", "zh-TW") == "zh"


def test_display_width_counts_cjk_twice() -> None:
    assert i18n.display_width("ID") == 2
    assert i18n.display_width("编号") == 4
    assert i18n.ljust("编号", 6) == "编号  "
    assert i18n.ljust("ID", 6) == "ID".ljust(6)


def test_env_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(i18n.ENV, "zh")
    assert i18n.env_default() == "zh"
    monkeypatch.setenv(i18n.ENV, "fr")
    assert i18n.env_default() == "en"
    monkeypatch.delenv(i18n.ENV)
    assert i18n.env_default() == "en"
