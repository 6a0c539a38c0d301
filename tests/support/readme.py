"""The code blocks of a Markdown file, each with its section, line, language and marker: the HTML comment
on the line just above its fence (``<!-- not run: why -->``, ``<!-- file: NAME -->``, ``<!-- checked:
what -->``), which says how tests/docs/test_readme.py treats a block it cannot simply run.

>>> text = "# t\\n```shell\\nls\\n```\\n## Two\\n<!-- file: a.yaml -->\\n```yaml\\nx: 1\\n```\\n"
>>> [(b.section, b.line, b.language, b.marker, b.text) for b in blocks(text)]
[('', 2, 'shell', '', 'ls\\n'), ('Two', 7, 'yaml', 'file: a.yaml', 'x: 1\\n')]
>>> normalised_table("│ F │ 328 [319, 337] │\\n└──┴───┘")
['│ F │ # [#, #] │', '└─┴─┘']
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_MARKER = re.compile(r"^<!-- (.+?) -->$")
_NUMBER = re.compile(r"-?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?(e[+-]?\d+)?")


@dataclass(frozen=True)
class Block:
    section: str    # the "## " heading it is under ('' before the first); "### " stays in its "## "
    line: int       # 1-based line of its opening fence
    language: str   # the fence's tag ('' when untagged)
    marker: str     # the text of the HTML comment just above the fence, or ''
    text: str

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.section or 'top'}, {self.language or 'untagged'})"


def blocks(text: str) -> list[Block]:
    """Every fenced block, in order."""
    lines, found, section, i = text.split("\n"), [], "", 0
    while i < len(lines):
        if lines[i].startswith("## "):
            section = lines[i][3:].strip()
        if lines[i].startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            above = _MARKER.match(lines[i - 1]) if i else None
            found.append(Block(section, i + 1, lines[i][3:].strip(), above.group(1) if above else "",
                               "\n".join(lines[i + 1:end]) + "\n"))
            i = end
        i += 1
    return found


def normalised_table(text: str) -> list[str]:
    """A printed table with its numbers as ``#`` and runs of spaces and rules as one: what stays the same
    when the noise, and so the widths of the columns, change."""
    return [re.sub(r"─+", "─", re.sub(r" +", " ", _NUMBER.sub("#", line))).strip() for line in text.strip().split("\n")]
