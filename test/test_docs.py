"""The documents a user reads stay true to the repository: every relative link and image resolves
(the file, and the heading of a #anchor), every file named in backticks exists, nothing points
outside the repository; README.md stays short and EVALUATION.md and BENCHMARKS.md open with their
summary table (issue 31: docs in layers)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPOSITORY / "README.md", REPOSITORY / "EVALUATION.md", REPOSITORY / "BENCHMARKS.md",
             *sorted((REPOSITORY / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
REPOSITORY_PATH = re.compile(r"`((?:focus_ros|config|launch|test|benchmarks|docs|interfaces)/[\w./-]+\.\w+)`")
README_MAX_LINES = 300


def heading_anchors(path: Path) -> set[str]:
    """GitHub's anchors of the headings of a Markdown file (outside code blocks; repeats numbered)."""
    seen, anchors, in_code = {}, set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = None if in_code else re.match(r"#{1,6} (.*)", line)
        if heading:
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1).strip())
            anchor = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            anchors.add(anchor if count == 0 else f"{anchor}-{count}")
    return anchors


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPOSITORY)))
def test_links_and_named_files_resolve_inside_the_repository(document):
    text = document.read_text()
    problems = []
    for target in LINK.findall(re.sub(r"```.*?```", "", text, flags=re.S)):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        name, _, anchor = target.partition("#")
        destination = (document.parent / name).resolve() if name else document
        if not destination.is_relative_to(REPOSITORY):
            problems.append(f"{target}: outside the repository")
        elif not destination.exists():
            problems.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in heading_anchors(destination):
            problems.append(f"{target}: no such heading")
    for match in REPOSITORY_PATH.finditer(text):
        named = match.group(1)
        if "*" in named or "NNNN" in named or text[max(0, match.start() - 6):match.start()].endswith("then "):
            continue  # a pattern, or a file as it was then
        if not (REPOSITORY / named).exists():
            problems.append(f"`{named}`: no such file")
    problems += [f"{path}: a path outside the repository" for path in re.findall(r"/work/\S*", text)]
    assert problems == []


def test_the_readme_is_short_and_names_the_two_commands():
    text = (REPOSITORY / "README.md").read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "make demo" in text and "make test" in text


@pytest.mark.parametrize("name", ["EVALUATION.md", "BENCHMARKS.md"])
def test_evaluation_and_benchmarks_open_with_a_summary_table(name):
    lines = (REPOSITORY / name).read_text().splitlines()
    first_table = next(number for number, line in enumerate(lines) if line.startswith("|"))
    assert first_table < 40
    assert len(lines) < 200, "the detail belongs in docs/evaluation/ and docs/benchmarks/"
