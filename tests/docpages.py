"""The documentation pages the tests run: README.md, then every docs/*.md, found by glob.

A page added to docs/ is run by tests/test_readme.py with no change to the tests; tests that
check one snippet in depth find it here by a marker, on whichever page it lives.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    """README.md first, then the docs/ pages in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def fenced(text: str) -> list[tuple[str, list[str]]]:
    """A page's fenced blocks in order, as (language, lines)."""
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    lang = ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, lang = [], line[3:].strip()
            else:
                blocks.append((lang, current))
                current = None
            continue
        if current is not None:
            current.append(line)
    return blocks


def python_blocks() -> list[str]:
    """Every ```python block of every page, as text."""
    return ["\n".join(lines) + "\n" for page in pages()
            for lang, lines in fenced(page.read_text()) if lang == "python"]


def python_block(marker: str) -> str:
    """The one ```python block, on any page, that contains ``marker``."""
    found = [b for b in python_blocks() if marker in b]
    assert len(found) == 1, (marker, len(found))
    return found[0]


def without_fences(text: str) -> str:
    """A page's text outside its fenced blocks (headings and links are there)."""
    return re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.S | re.M)
