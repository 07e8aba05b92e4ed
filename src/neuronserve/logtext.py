"""What a log line may carry of what clients sent: escaped so one event is one line, and a client's
value kept inside its own `key=value` field.

Why every message is escaped: log lines carry what clients sent (paths, ids, model names, error
texts). A `%0A` in a path became a real newline in the text log, a forged line that a reader or a log
query could not tell from ours. `escape` is the one function both formats, the engine relay and the
last words use: control characters become backslash escapes (`\\x0a`), so one event is always one line.

Why a value a client chose is also percent-encoded (`field`): the access line is `key=value` fields,
and log queries find a field by searching for `status=` or `request_id=` anywhere in the line. A path
`/x%20status=200%20request_id=FORGED` put those words into the line before the real fields, and the
first match was the client's. `field` leaves only characters that cannot end a value or start one
(`=`, a space, a quote, a backslash, anything outside printable ASCII become `%XX` of their bytes;
a path keeps its own `%XX` escapes as the client sent them).
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls, DEL, C1 controls and the Unicode line/paragraph separators: each breaks or hides text
# in a terminal or a log viewer. A backslash is left alone: it cannot start a new line.
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]
_ESCAPES = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in _CONTROLS}


def escape(text: str) -> str:
    """`text` with its control characters escaped (the common all-printable case: one C-level scan)."""
    if text.isprintable():
        return text
    return text.translate(_ESCAPES)


_FIELD_SAFE = re.compile(rb"[A-Za-z0-9\-._~/!$&'()*+,;:@%]*")  # what a field value keeps as it is


_FIELDS: dict[str | bytes, str] = {}  # field()'s recent answers: the methods and paths of every request
_FIELDS_MAX = 256


def field(value: str | bytes) -> str:
    """`value` as one `key=value` field's value that no query can mistake for another field (module
    docstring): bytes as they are, text as UTF-8, every byte outside _FIELD_SAFE as `%XX`.

    Short values are remembered (at most _FIELDS_MAX, forgotten all at once when full): every access
    line asks for its method and path, nearly always the same few."""
    known = _FIELDS.get(value)
    if known is not None:
        return known
    raw = value if isinstance(value, bytes) else value.encode("utf-8", "backslashreplace")
    if _FIELD_SAFE.fullmatch(raw):
        text = raw.decode("ascii")
    else:
        text = "".join(chr(b) if _FIELD_SAFE.fullmatch(bytes((b,))) else f"%{b:02X}" for b in raw)
    if len(value) <= 256:
        if len(_FIELDS) >= _FIELDS_MAX:
            _FIELDS.clear()
        _FIELDS[value] = text
    return text


def escape_value(value: Any) -> Any:
    return escape(value) if isinstance(value, str) else value
