"""Tar header blocks built by hand, for the tests of the tar reader (tests/unit/stage/test_tarread.py)
and of staging archives (tests/s3/stage/test_archive.py): fields tarfile would never write can be set."""

from __future__ import annotations

END = bytes(1024)  # the two zero blocks that end an archive


def header(name: bytes, size_field: bytes, kind: bytes = b"0") -> bytes:
    """One ustar header block: mode 644, uid, gid and mtime 0, `size_field` as given, its checksum."""
    h = bytearray(512)
    h[0 : len(name)] = name
    h[100:108] = b"0000644\0"
    h[108:116] = b"0000000\0"
    h[116:124] = b"0000000\0"
    h[124:136] = size_field
    h[136:148] = b"00000000000\0"
    h[148:156] = b" " * 8
    h[156:157] = kind
    h[257:265] = b"ustar\x0000"
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)


def octal(n: int) -> bytes:
    """A 12-byte octal size field."""
    return b"%011o\0" % n
