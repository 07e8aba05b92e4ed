"""A bounded tar reader: every 512-byte header is checked here before anything acts on it.

Why not `tarfile`: an archive is attacker-controlled input, and the interpreter's reader has had
fatal bugs on crafted headers. A member whose size field is negative (base-256, first byte 0xff)
makes CPython's tarfile seek backwards and loop forever (CVE-2025-8194, fixed upstream only in
3.12.12 / 3.13.6; the 3.11.7 of the test venv hangs on it). Its `getmembers()` also reads every
header into memory before the first byte is written. This reader streams instead: one header at
a time, numbers parsed by us (a negative or malformed field is an error, never an offset), the
checksum verified, extended headers (pax `x`/`g`, GNU `L`/`K`) bounded in size and in how many
may precede one member, and a member's data read exactly as declared, so a lying header can
neither move the reader backwards nor make it write more than the size checked by the caller.
Compression (gzip, bzip2, xz) is detected from the magic bytes, as `tarfile.open("r:*")` did.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol

BLOCK = 512
ZERO_BLOCK = bytes(BLOCK)
MAX_EXTENDED = 64 * 1024  # one pax or GNU long-name header's data; real ones are a few hundred bytes
MAX_EXTENDED_TOTAL = 128 * 1024 * 1024  # all of them in one archive (bounds the work they can cost)
MAX_CHAIN = 8  # extended headers in a row before one member (tar writes at most 3: g, x or L, K)
MAX_NAME = 4096  # Linux PATH_MAX: a longer name cannot be created anyway
CHUNK = 1024 * 1024

FILE_TYPES = (b"0", b"\0", b"7")  # regular, old regular, contiguous (a regular file everywhere)
LINK_TYPES = (b"1", b"2")
SPECIAL_TYPES = (b"3", b"4", b"6")  # character device, block device, FIFO
# Errors of the decompressors on damaged input (gzip raises BadGzipFile, an OSError; a cut stream EOFError).
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError, ValueError)


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class BadArchive(Exception):
    """The bytes are not a well-formed tar archive; the message says what and where."""


@dataclass(frozen=True)
class Header:
    """The fields of one 512-byte header block that extraction needs (the rest is ignored)."""

    name: bytes
    size: int
    type: bytes
    real_size: int = 0  # an old GNU sparse member's expanded size (type S)


@dataclass(frozen=True)
class Member:
    """One archive member after its extended headers were applied: `kind` is file, dir, link,
    special or sparse; `offset` is its header's byte offset in the uncompressed tar (for messages)."""

    name: str
    kind: str
    size: int
    offset: int


def number(field: bytes, what: str, offset: int) -> int:
    """A numeric header field: NUL/space-terminated octal, or GNU base-256 (first byte 0x80).

    Base-256 with first byte 0xff is a negative number: refused, as is any non-octal text.
    """
    if field[:1] == b"\xff":
        raise BadArchive(f"the {what} field of the header at byte {offset} is negative")
    if field[:1] == b"\x80":
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip(b" ")
    if not text:
        return 0
    if any(c not in b"01234567" for c in text):
        raise BadArchive(f"the {what} field of the header at byte {offset} is not an octal number: {text!r}")
    return int(text, 8)


def parse_header(block: bytes, offset: int) -> Header:
    """Check one non-zero header block (checksum, numbers) and return its fields."""
    if len(block) != BLOCK:
        raise BadArchive(f"the header at byte {offset} is cut short ({len(block)} of {BLOCK} bytes)")
    stored = number(block[148:156], "checksum", offset)
    unsigned = sum(block[:148]) + sum(block[156:]) + 8 * 32
    signed = unsigned - sum(256 for b in block[:148] + block[156:] if b > 127)
    if stored not in (unsigned, signed):
        raise BadArchive(f"the header at byte {offset} has a bad checksum (damaged, or not a tar archive)")
    name = block[:100].split(b"\0", 1)[0]
    kind = block[156:157]
    prefix = block[345:500].split(b"\0", 1)[0]
    if prefix and block[257:263] == b"ustar\0" and kind not in (b"L", b"K"):
        name = prefix + b"/" + name
    real = number(block[483:495], "sparse size", offset) if kind == b"S" else 0
    return Header(name=name, size=number(block[124:136], "size", offset), type=kind, real_size=real)


def parse_pax(data: bytes, offset: int) -> dict[str, bytes]:
    """pax extended records, `<length> <key>=<value>\\n` each; a malformed record is an error."""
    records: dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        if data[pos] == 0:  # NUL padding after the last record, and nothing else
            if data[pos:].strip(b"\0"):
                raise BadArchive(f"the pax header at byte {offset} has a malformed record")
            break
        space = data.find(b" ", pos, pos + 20)
        digits = data[pos:space] if space > pos else b""
        if not digits.isdigit():
            raise BadArchive(f"the pax header at byte {offset} has a malformed record")
        end = pos + int(digits)
        record = data[space + 1 : end]
        if end > len(data) or end <= space + 1 or not record.endswith(b"\n") or b"=" not in record:
            raise BadArchive(f"the pax header at byte {offset} has a malformed record")
        key, _, value = record[:-1].partition(b"=")
        records[key.decode("utf-8", "replace")] = value
        pos = end
    return records


def open_stream(path: str, stack: contextlib.ExitStack[bool | None]) -> Readable:
    """The uncompressed tar stream of `path` (gzip, bzip2, xz or plain, told by its magic bytes)."""
    raw: BinaryIO = stack.enter_context(open(path, "rb"))  # noqa: SIM115
    magic = raw.read(6)
    raw.seek(0)
    if magic.startswith(b"\x1f\x8b"):
        return stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))
    if magic.startswith(b"BZh"):
        return stack.enter_context(bz2.BZ2File(raw))
    if magic.startswith(b"\xfd7zXZ\0"):
        return stack.enter_context(lzma.LZMAFile(raw))
    return raw


class TarReader:
    """Members of one tar stream, in order, each header checked before it is acted on.

    `members()` yields each member; for a file, `data()` then yields its bytes (exactly `size`).
    Data a caller leaves unread is skipped (read and dropped: a compressed stream cannot seek).
    """

    def __init__(self, stream: Readable) -> None:
        self._stream = stream
        self._pos = 0  # bytes consumed from the uncompressed stream
        self._left = 0  # data bytes of the current member not yet read
        self._pad = 0  # its padding up to the next block
        self._extended_total = 0  # data bytes of every extended header so far

    def _read(self, n: int, what: str) -> bytes:
        out = b""
        while len(out) < n:
            try:
                chunk = self._stream.read(n - len(out))
            except _READ_ERRORS as err:
                raise BadArchive(f"cannot read {what} at byte {self._pos + len(out)}: {err}") from None
            if not chunk:
                at = self._pos + len(out)
                raise BadArchive(f"the archive ends inside {what} at byte {at} (truncated?)")
            out += chunk
        self._pos += n
        return out

    def data(self) -> Iterator[bytes]:
        """The current file member's bytes, in chunks of at most 1 MiB, then its padding consumed."""
        while self._left:
            chunk = self._read(min(self._left, CHUNK), "a member's data")
            self._left -= len(chunk)
            yield chunk
        if self._pad:
            self._read(self._pad, "a member's padding")
            self._pad = 0

    def _extended(self, header: Header, offset: int) -> bytes:
        if header.size > MAX_EXTENDED:
            raise BadArchive(f"the extended header at byte {offset} declares {header.size} bytes")
        self._extended_total += header.size
        if self._extended_total > MAX_EXTENDED_TOTAL:
            raise BadArchive(f"extended headers total over {MAX_EXTENDED_TOTAL} bytes at byte {offset}")
        data = self._read(header.size, "an extended header")
        self._read(-header.size % BLOCK, "an extended header's padding")
        return data

    def _next_header(self) -> tuple[Header, int] | None:
        for _ in self.data():  # skip what the caller left unread
            pass
        offset = self._pos
        block = self._read(BLOCK, "a header (no end-of-archive marker)")
        if block == ZERO_BLOCK:
            return None
        return parse_header(block, offset), offset

    def members(self) -> Iterator[Member]:
        """Every member; extended headers are read and applied to the member they precede."""
        global_: dict[str, bytes] = {}
        pending: dict[str, bytes] = {}
        chain = 0
        while (found := self._next_header()) is not None:
            header, offset = found
            if header.type in (b"x", b"g", b"L", b"K"):
                chain += 1
                if chain > MAX_CHAIN:
                    raise BadArchive(f"more than {MAX_CHAIN} extended headers in a row at byte {offset}")
                data = self._extended(header, offset)
                if header.type == b"L":
                    pending["path"] = data.split(b"\0", 1)[0]
                elif header.type != b"K":  # a GNU long link name: links are refused anyway
                    (global_ if header.type == b"g" else pending).update(parse_pax(data, offset))
                continue
            chain = 0
            member = _member(header, {**global_, **pending}, offset)
            pending = {}
            if member.kind == "file":
                self._left, self._pad = member.size, -member.size % BLOCK
            yield member


def _member(header: Header, pax: dict[str, bytes], offset: int) -> Member:
    raw_name = pax.get("path", header.name)
    if len(raw_name) > MAX_NAME:
        raise BadArchive(
            f"the member name at byte {offset} is {len(raw_name)} bytes long (at most {MAX_NAME})"
        )
    try:
        name = raw_name.decode("utf-8")
    except UnicodeDecodeError:
        raise BadArchive(f"the member name at byte {offset} is not UTF-8: {raw_name[:80]!r}") from None
    size = header.size
    if "size" in pax:
        if not pax["size"].isdigit():
            raise BadArchive(f"the pax size of {name!r} at byte {offset} is not a whole number")
        size = int(pax["size"])
    kind = _kind(header.type, name, offset)
    if header.type == b"S" or any(k.startswith("GNU.sparse.") for k in pax):
        return _sparse(header, pax, name, offset)
    if kind in ("dir", "link", "special") and size:
        raise BadArchive(f"the {kind} member {name!r} at byte {offset} declares {size} bytes of data")
    return Member(name=name, kind=kind, size=size, offset=offset)


def _sparse(header: Header, pax: dict[str, bytes], name: str, offset: int) -> Member:
    """A sparse member, named and sized as it would expand (refused by the caller, with that size)."""
    real = pax.get("GNU.sparse.realsize", pax.get("GNU.sparse.size", b""))
    size = int(real) if real.isdigit() else header.real_size
    raw = pax.get("GNU.sparse.name", b"")
    return Member(name=raw.decode("utf-8", "replace") or name, kind="sparse", size=size, offset=offset)


def _kind(type_: bytes, name: str, offset: int) -> str:
    if type_ in FILE_TYPES:
        return "dir" if type_ == b"\0" and name.endswith("/") else "file"
    if type_ == b"5":
        return "dir"
    if type_ in LINK_TYPES:
        return "link"
    if type_ in SPECIAL_TYPES:
        return "special"
    if type_ == b"S":
        return "sparse"
    raise BadArchive(f"the member at byte {offset} has an unsupported type {type_!r}")
