"""The bounded tar reader (stage/tarread.py) against archives tarfile writes, and against headers built
by hand that tarfile would never write: each malformed one is an error naming what is wrong."""

from __future__ import annotations

import io
import os
import tarfile

import pytest
from tests.support.tarblocks import END, header, octal

from neuronserve.stage.tarread import MAX_CHAIN, BadArchive, TarReader, number, parse_pax


def read_all(blob: bytes) -> list[tuple[str, str, int, bytes]]:
    reader = TarReader(io.BytesIO(blob))
    out = []
    for m in reader.members():
        data = b"".join(reader.data()) if m.kind == "file" else b""
        out.append((m.name, m.kind, m.size, data))
    return out


FILES = {
    "config.json": b"{}",
    "empty.txt": b"",
    "sub/" + "n" * 150 + "/w.bin": os.urandom(70_000),  # over ustar's 100 bytes: GNU L / pax path
    "sub/ünïcödé.txt": "ü".encode(),
}


@pytest.mark.parametrize("fmt", [tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT])
def test_every_member_tarfile_writes_is_read_back_the_same(fmt: int) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt, encoding="utf-8") as tar:
        d = tarfile.TarInfo("sub")
        d.type = tarfile.DIRTYPE
        tar.addfile(d)
        for name, data in FILES.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    got = read_all(buf.getvalue())
    assert got[0][:2] == ("sub/", "dir")  # tarfile writes a directory name with its slash
    assert [(n, k, s, d) for n, k, s, d in got[1:]] == [
        (name, "file", len(data), data) for name, data in FILES.items()
    ]


def test_numbers_negative_or_not_octal_are_errors() -> None:
    assert number(octal(1234), "size", 0) == 1234
    assert number(b"\x80" + (2**40).to_bytes(11, "big"), "size", 0) == 2**40
    assert number(b"\0" * 12, "size", 0) == 0
    with pytest.raises(BadArchive, match="size field of the header at byte 512 is negative"):
        number(b"\xff" * 12, "size", 512)
    with pytest.raises(BadArchive, match="not an octal number"):
        number(b"12389\0      ", "size", 0)


def test_a_negative_size_after_a_good_member_fails_at_once() -> None:
    """The CVE-2025-8194 shape: -512 would send a reader back onto this same header."""
    negative = b"\xff" + (256**11 - 512).to_bytes(11, "big")
    blob = header(b"ok.txt", octal(0)) + header(b"evil.bin", negative) + END
    with pytest.raises(BadArchive, match="header at byte 512 is negative"):
        read_all(blob)


@pytest.mark.parametrize(
    "records",
    [b"0 x\n", b"99 path=a\n", b"8 path=a", b"5 ab\n", b"x path=a\n", b"7 abc=\n" + b"3 a"],
    ids=["zero-length", "overrun", "no-newline", "no-equals", "no-length", "cut"],
)
def test_malformed_pax_records_are_errors(records: bytes) -> None:
    with pytest.raises(BadArchive, match="malformed record"):
        parse_pax(records, 0)


def test_pax_records_are_read() -> None:
    assert parse_pax(b"11 path=ab\n12 size=100\n", 0) == {"path": b"ab", "size": b"100"}


def test_bad_headers_are_named() -> None:
    damaged = bytearray(header(b"a.txt", octal(0)))
    damaged[0] = ord("b")
    with pytest.raises(BadArchive, match="bad checksum"):
        read_all(bytes(damaged) + END)
    with pytest.raises(BadArchive, match="unsupported type b'V'"):
        read_all(header(b"vol", octal(0), b"V") + END)
    with pytest.raises(BadArchive, match="not UTF-8"):
        read_all(header(b"\xff\xfe.bin", octal(0)) + END)
    with pytest.raises(BadArchive, match="no end-of-archive marker"):
        read_all(header(b"a.txt", octal(0)))
    with pytest.raises(BadArchive, match="ends inside a member's data"):
        read_all(header(b"a.txt", octal(5000)) + bytes(512))


def test_extended_headers_are_bounded() -> None:
    pax = b"11 path=ab\n".ljust(512, b"\0")
    chain = (header(b"x", octal(11), b"x") + pax) * (MAX_CHAIN + 1)
    with pytest.raises(BadArchive, match=f"more than {MAX_CHAIN} extended headers"):
        read_all(chain + header(b"a", octal(0)) + END)
    with pytest.raises(BadArchive, match="extended header at byte 0 declares 1073741824 bytes"):
        read_all(header(b"x", octal(2**30), b"x") + END)
    with pytest.raises(BadArchive, match="malformed record"):
        parse_pax(b"11 path=ab\n\0\0junk", 0)
    assert parse_pax(b"11 path=ab\n" + bytes(400), 0) == {"path": b"ab"}
    # one pax header applies to the member after it, and only to that one
    blob = header(b"x", octal(11), b"x") + pax + header(b"a", octal(0)) + header(b"b", octal(0)) + END
    assert [m[0] for m in read_all(blob)] == ["ab", "b"]


def test_a_negative_pax_size_is_an_error() -> None:
    pax = b"12 size=-10\n".ljust(512, b"\0")
    with pytest.raises(BadArchive, match="pax size of 'a' at byte 1024 is not a whole number"):
        read_all(header(b"x", octal(12), b"x") + pax + header(b"a", octal(0)) + END)


def test_extended_headers_are_bounded_over_the_whole_archive(monkeypatch: pytest.MonkeyPatch) -> None:
    from neuronserve.stage import tarread

    monkeypatch.setattr(tarread, "MAX_EXTENDED_TOTAL", 100)
    pax = b"11 path=ab\n".ljust(512, b"\0")
    one = header(b"x", octal(11), b"x") + pax + header(b"a", octal(0))
    assert len(read_all(one * 9 + END)) == 9  # 99 bytes of extended data
    with pytest.raises(BadArchive, match="extended headers total over 100 bytes"):
        read_all(one * 10 + END)
