"""S3 locations that are placeholders, not a bucket of the user's: refused by every deploy path.

A sample or a doc line copied as is (`NEURONSERVE_CACHE_URI=s3://my-bucket/...`) passes every syntax
check and fails only at start, as an AccessDenied, or worse succeeds: a placeholder name is somebody's
real bucket, and the compiled artifacts would be published to it. So a location whose bucket is a
placeholder is refused before anything is created, wherever it appears: any environment value (the
model, the compile cache, an adapter list in JSON) and the S3 flags (`--model-data`, `--async-output`).

Placeholders: the names samples and docs use for "your bucket", names starting `amzn-s3-demo-` (the
prefix AWS's own examples use, which no bucket may have: "Bucket names must not start with the prefix
amzn-s3-demo-", https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html), an
empty bucket (`s3:///...`: an unset shell variable), an unexpanded template (`<bucket>`, `${BUCKET}`,
`{bucket}`) and a name in capitals (`BUCKET`, `YOUR_BUCKET`: the same page allows lowercase letters only).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from neuronserve.errors import ConfigError

_S3_BUCKET = re.compile(r"s3://([^/\s\"',;\]]*)")
NAMES = frozenset(
    {
        "my-bucket",
        "mybucket",
        "my-bucket-name",
        "your-bucket",
        "yourbucket",
        "your-bucket-name",
        "bucket-name",
        "example",
        "example-bucket",
        "examplebucket",
        "doc-example-bucket",
    }
)


def is_placeholder(bucket: str) -> bool:
    """Whether `bucket` (the text between `s3://` and the next `/`) stands for the user's bucket."""
    name = bucket.strip()
    return (
        not name
        or name.lower() in NAMES
        or name.lower().startswith(("amzn-s3-demo-", "doc-example-bucket"))
        or any(c in name for c in "<>${}")
        or (name.upper() == name and any(c.isalpha() for c in name))
    )


def check_placeholders(values: Mapping[str, str | None]) -> None:
    """Refuse the first placeholder bucket among `values` (a variable or flag -> its value), naming it.

    The value itself is not shown (it may be a secret's); the bucket is."""
    for origin, value in values.items():
        for match in _S3_BUCKET.finditer(value or ""):
            bucket = match.group(1)
            if is_placeholder(bucket):
                what = f"s3://{bucket}/ is a placeholder" if bucket else "s3:/// names no bucket"
                raise ConfigError(
                    f"{origin}: {what}, not a bucket you own (a sample or doc line copied as is?): "
                    "set an S3 location in your own bucket, e.g. s3://<your-bucket>/<prefix>/, or remove it",
                    (origin,),
                )
