"""The `s3` connector: any S3-compatible object store."""
