"""Every relative link in the README and docs/ points at a file that exists, and at a heading of that page when
it names one, and no page points outside the repository, so a newcomer following the documentation never lands
on nothing."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGES = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
LINK_TO_HEADING = re.compile(r"\]\(([^)#\s]*)#([^)\s]+)\)")  # the page (empty: this one) and the heading's anchor


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_relative_links_resolve_inside_the_repository(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        resolved = (page.parent / target).resolve()
        if not resolved.is_relative_to(REPO_ROOT) or not resolved.exists():
            broken.append(target)
    assert broken == [], f"{page.name} links to missing or outside files: {broken}"


def test_readme_links_every_docs_page() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    unlinked = [p.name for p in PAGES[1:] if f"docs/{p.name}" not in readme]
    assert unlinked == []


def anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces as hyphens, and a
    repeated heading numbered (`-1`, `-2`); lines in code blocks are not headings."""
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.DOTALL | re.MULTILINE)
    made: Counter[str] = Counter()
    found = set()
    for heading in re.findall(r"^#{1,6} +(.+?)\s*$", text, re.MULTILINE):
        anchor = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        found.add(f"{anchor}-{made[anchor]}" if made[anchor] else anchor)
        made[anchor] += 1
    return found


def test_links_to_a_heading_find_it() -> None:
    links = [
        (page, (page.parent / target).resolve() if target else page, anchor)
        for page in PAGES
        for target, anchor in LINK_TO_HEADING.findall(page.read_text())
        if target.endswith(".md") or not target
    ]
    assert len(links) > 10, "the docs link to headings"
    missing = [
        f"{page.name} → {target.name}#{anchor}" for page, target, anchor in links if anchor not in anchors(target)
    ]
    assert missing == []
