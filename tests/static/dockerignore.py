"""Which files a `.dockerignore` leaves in the build context, decided the way Docker decides it.

Docker (moby's patternmatcher, used by BuildKit and the classic builder) reads the patterns in order;
a path is excluded when the LAST pattern that matches it, or matches one of its parent directories,
is a plain pattern, and kept when it is a `!` exception. `*` and `?` never cross a `/`; `**` matches
any number of directories, none included. Lines starting with `#` are comments; a leading `/` is
dropped. Written here (no copy of moby's code) so the static tier can ask the question that matters:
does every file the Dockerfiles COPY reach the builder, and nothing else?
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath


def _regex(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out + r"\Z")


def parse(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(is_exception, compiled pattern) per line, in order."""
    rules = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        cleaned = str(PurePosixPath(line.removeprefix("!").strip().lstrip("/")))
        rules.append((exception, _regex(cleaned)))
    return rules


def excluded(rules: list[tuple[bool, re.Pattern[str]]], path: str) -> bool:
    """Whether `path` (relative, '/'-separated) is left out of the build context."""
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]  # parents first, then the path
    out = False
    for exception, regex in rules:
        if any(regex.match(c) for c in candidates):
            out = not exception
    return out
