"""Session-wide fixtures: one real moto S3 server on 127.0.0.1, shared by every tier that needs S3."""

from tests.support.s3server import bucket, s3, s3_env, s3_server

__all__ = ["bucket", "s3", "s3_env", "s3_server"]
