"""The exact refusals of the S3 key -> path mapping, and the directory reading of an S3 location.

Every message here reaches the person who set SM_VLLM_MODEL / the artifacts URI as the one line the CLI
prints before exiting 1, so it must name the bad value and what was expected. The last tests
check that these inputs are refused at all; the others pin what the refusal says (added where mutation
testing showed the messages unchecked: docs/TESTING.md).
"""

from __future__ import annotations

import pytest

from neuronserve.errors import StageError
from neuronserve.stage.paths import S3Uri, check_no_conflicts, key_to_relpath, parse_s3_uri, safe_relpath


def refusal(call: object, *args: object, **kwargs: object) -> str:
    """The whole message of the StageError `call(*args, **kwargs)` raises."""
    assert callable(call)
    with pytest.raises(StageError) as err:
        call(*args, **kwargs)
    return str(err.value)


def test_a_uri_without_the_s3_scheme_is_refused_naming_it() -> None:
    """A local path or http URL given where an s3:// URI belongs: the message quotes it and shows the form."""
    assert (
        refusal(parse_s3_uri, "http://x/y")
        == "'http://x/y' is not an s3:// URI; expected s3://bucket/prefix/"
    )


def test_a_uri_without_a_bucket_is_refused_naming_it() -> None:
    """`s3:///key` (three slashes, a common typo) has no bucket: said so, with the value quoted."""
    assert (
        refusal(parse_s3_uri, "s3:///key") == "'s3:///key' has no bucket name; expected s3://bucket/prefix/"
    )


@pytest.mark.parametrize(
    ("key", "prefix_key"),
    [("models/llama", "models/llama/"), ("models/llama/", "models/llama/"), ("", "")],
)
def test_as_prefix_adds_exactly_one_slash(key: str, prefix_key: str) -> None:
    """A key already ending in `/` (the form the docs show) is kept, not doubled to `p//`, which would list
    nothing; the bucket root (empty key) stays empty rather than becoming `/`, which lists nothing either."""
    uri = S3Uri("bucket", key).as_prefix()
    assert (uri.bucket, uri.key) == ("bucket", prefix_key)


@pytest.mark.parametrize(
    ("key", "uri"),
    [("p", "s3://b/p/sub/w.bin"), ("p/", "s3://b/p/sub/w.bin"), ("", "s3://b/sub/w.bin")],
)
def test_child_is_the_file_under_the_directory(key: str, uri: str) -> None:
    """`child` names a file inside the location read as a directory: same bucket, one slash between."""
    child = S3Uri("b", key).child("sub/w.bin")
    assert (child.bucket, child.uri) == ("b", uri)


def test_a_key_outside_the_prefix_is_refused_naming_both() -> None:
    """A listing that returns a key outside the asked prefix is refused, naming the key and the prefix."""
    assert refusal(key_to_relpath, "other/x", "p/") == "refusing S3 key 'other/x': not under prefix 'p/'"


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("p/../x", "'..' or '.' would escape the target directory"),
        ("p/.neuronserve-manifest.json", "the name is reserved for neuronserve's bookkeeping"),
    ],
)
def test_an_unsafe_key_is_refused_as_an_s3_key(key: str, reason: str) -> None:
    """Refusals of a key under the prefix call it an "S3 key" (not an archive member) and quote the part
    after the prefix, which is the name that would have been written."""
    rest = key[len("p/") :]
    assert refusal(key_to_relpath, key, "p/") == f"refusing S3 key {rest!r}: {reason}"


def test_a_file_clashing_with_a_deeper_directory_is_refused() -> None:
    """`a` and `a/b/c` cannot both be written: the clash is found through every level, not just the parent."""
    message = refusal(check_no_conflicts, ["a", "a/b/c"], where="s3://b/p/")
    assert message == "s3://b/p/: 'a' is both a file and a directory prefix of 'a/b/c'"


def test_nested_files_without_a_clash_pass() -> None:
    """A real model layout (nested directories, files side by side) passes the clash check."""
    check_no_conflicts(["config.json", "sub/dir/w.bin", "sub/dir/x.bin", "sub/y.bin"], where="s3://b/p/")


@pytest.mark.parametrize(
    "key",
    [
        "p/.neuronserve-manifest.json/x",
        "p/.neuronserve-journal.jsonl/x",
        "p/w.bin.neuronserve-part/x",
        "p/.neuronserve-manifest.json.tmp",  # the manifest's own temporary name: overwritten, never published
    ],
)
def test_a_key_making_a_directory_of_a_bookkeeping_name_is_refused(key: str) -> None:
    """Before the download, not after: a key `.neuronserve-manifest.json/x` would create a directory where
    the manifest goes, and the commit at the very end would fail with a bare "Is a directory" (likewise the
    journal, and `w.bin`'s part file); so any component with a bookkeeping name is refused up front."""
    rest = key[len("p/") :]
    assert refusal(key_to_relpath, key, "p/") == (
        f"refusing S3 key {rest!r}: the name is reserved for neuronserve's bookkeeping"
    )


@pytest.mark.parametrize(
    ("key", "rel"),
    [
        ("p/a.json", "a.json"),
        ("p/sub/dir/w.bin", "sub/dir/w.bin"),
        ("p/sub/", None),
        ("p/", None),
        ("p/a//b", "a/b"),
    ],
)
def test_keys_map_under_the_prefix(key: str, rel: str | None) -> None:
    assert key_to_relpath(key, "p/") == rel


@pytest.mark.parametrize(
    "name",
    [
        "../x",
        "a/../../x",
        "/etc/passwd",
        "a\\..\\x",
        "a/./b",
        ".",
        "",
        "a\x00b",
        ".neuronserve-manifest.json",
        "d/.neuronserve-journal.jsonl",
        "w.bin.neuronserve-part",
    ],
)
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(StageError, match="refusing"):
        safe_relpath(name, what="S3 key")


def test_key_outside_prefix_and_file_dir_clash_are_refused() -> None:
    with pytest.raises(StageError):
        key_to_relpath("other/x", "p/")
    with pytest.raises(StageError, match="both a file and a directory"):
        check_no_conflicts(["a", "a/b"], where="s3://b/p/")


def test_uri_parsing() -> None:
    uri = parse_s3_uri("s3://bucket/models/llama")
    assert (uri.bucket, uri.key, uri.as_prefix().uri) == (
        "bucket",
        "models/llama",
        "s3://bucket/models/llama/",
    )
    for bad in ("http://x/y", "s3:///key", "bucket/key"):
        with pytest.raises(StageError):
            parse_s3_uri(bad)
