"""Writing a benchmark's table into a doc: the one helper the bench scripts share."""

from __future__ import annotations

import os
import pathlib


def replace_section(path: str, name: str, body: str) -> None:
    """Replace the text between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` in ``path``
    with ``body`` (or append the section, markers included, when the file has none)."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    text = pathlib.Path(path).read_text(encoding="utf-8") if os.path.exists(path) else ""
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        text = text[: text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
