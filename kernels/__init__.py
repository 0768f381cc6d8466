"""Kernel templates shipped as package data (installed as `neonlike.kernels`).

The renderers read their skeletons from here with `template(name)` and fill them with `fill`; the
files are plain text so a generated kernel can be traced back to the template it came from.

A template is `string.Template` text with named placeholders, where a placeholder alone on its
line is a block of lines (`fill` indents each line of its value like the placeholder, and removes
the line where the value is empty):

    def kernel_serial(${args}):        fill(text, args="out, dom, b0",
        ${serial}                           serial="for i0 in range(out.shape[0]):\\n    ...")
"""
from __future__ import annotations

import re
from importlib.resources import files
from string import Template

from ..memo import memoized

_BLOCK = re.compile(r"( *)\$\{(\w+)\}")
_SECTION = re.compile(r"(?:#|//) -- (.+)")


@memoized("kernels.templates", 32)
def template(name: str) -> str:
    """The text of the template file `name` shipped in this package (read once per process)."""
    return files(__name__).joinpath(name).read_text(encoding="utf-8")


@memoized("kernels.sections", 32)
def sections(name: str) -> dict[str, str]:
    """The parts of template file `name` that start at its `# -- <part>` (or `// -- <part>`) lines,
    each up to the next such line, without its trailing blank lines (the text before the first
    is the file's own description)."""
    parts: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in template(name).split("\n"):
        m = _SECTION.fullmatch(line)
        if m:
            current = parts[m.group(1)] = []
        elif current is not None:
            current.append(line)
    return {part: "\n".join(lines).rstrip("\n") for part, lines in parts.items()}


@memoized("kernels.parsed", 64)
def _parse(text: str) -> tuple[tuple, frozenset]:
    """Per line of `text`: (indent, block name) or (None, a Template); and every name used."""
    lines, names = [], set()
    for line in text.split("\n"):
        m = _BLOCK.fullmatch(line)
        if m:
            lines.append((m.group(1), m.group(2)))
            names.add(m.group(2))
        else:
            t = Template(line)
            lines.append((None, t))
            names.update(t.get_identifiers())
    return tuple(lines), frozenset(names)


def fill(text: str, **fields: object) -> str:
    """`text` (a template) with every placeholder filled from `fields`. A placeholder alone on
    its line takes a block: each line of its value (a str; one trailing newline is ignored) is
    indented like the placeholder, and an empty value removes the line. KeyError names a
    placeholder without a field, TypeError a field without a placeholder."""
    lines, names = _parse(text)
    unused = set(fields) - names
    if unused:
        raise TypeError(f"fields {sorted(unused)} fill no placeholder of the template "
                        f"(its placeholders: {sorted(names)})")
    out = []
    for indent, part in lines:
        if indent is None:
            out.append(part.substitute(fields))
            continue
        value = str(fields[part])
        if value.endswith("\n"):
            value = value[:-1]
        if value:
            out.extend(indent + line if line else line for line in value.split("\n"))
    return "\n".join(out)
