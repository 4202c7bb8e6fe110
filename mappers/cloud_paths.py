"""Whether a gs:// or s3:// path can name an object at all, by the providers' bucket naming rules (offline).

A path whose bucket no provider would accept is refused before a run starts: asked of the service,
such a name costs a lookup that can hang for minutes and then fails with an error that names
neither the flag nor the fix.

Rules as Google and AWS publish them:
https://cloud.google.com/storage/docs/buckets#naming and
https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html (general purpose buckets; the
rules every bucket created since March 2018 follows).
"""

from __future__ import annotations

import re

_GCS_CHARS = re.compile(r"[a-z0-9][a-z0-9._-]*[a-z0-9]")
_S3_CHARS = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]")
_IPV4 = re.compile(r"\d{1,3}(\.\d{1,3}){3}")
_S3_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
_S3_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def split_url(path: str) -> tuple[str, str, str] | None:
    """(scheme, bucket, object path) of a gs:// or s3:// path; None for anything else (a local path)."""
    for scheme in ("gs", "s3"):
        prefix = f"{scheme}://"
        if path.startswith(prefix):
            bucket, _, rest = path[len(prefix):].partition("/")
            return scheme, bucket, rest
    return None


def bucket_problem(path: str) -> str | None:
    """What is wrong with the bucket of a gs:// or s3:// ``path`` (None when it is well formed, or not such a path)."""
    parts = split_url(path)
    if parts is None:
        return None
    scheme, bucket, _ = parts
    if not bucket:
        return "names no bucket"
    if scheme == "gs":
        return _gcs_problem(bucket)
    return _s3_problem(bucket)


def _gcs_problem(bucket: str) -> str | None:
    if not _GCS_CHARS.fullmatch(bucket):
        return (f"bucket {bucket!r} is no Cloud Storage bucket name (3 to 63 characters: lowercase letters, digits, "
                "'-', '_' and '.', starting and ending with a letter or digit)")
    longest = 222 if "." in bucket else 63
    if len(bucket) < 3 or len(bucket) > longest or any(len(part) > 63 for part in bucket.split(".")):
        return f"bucket {bucket!r} is no Cloud Storage bucket name ({len(bucket)} characters; 3 to 63 allowed)"
    if _IPV4.fullmatch(bucket):
        return f"bucket {bucket!r} is an IP address, which Cloud Storage does not allow as a bucket name"
    if bucket.startswith("goog") or "google" in bucket:
        return f"bucket {bucket!r}: Cloud Storage bucket names cannot begin with 'goog' or contain 'google'"
    return None


def _s3_problem(bucket: str) -> str | None:
    if not 3 <= len(bucket) <= 63 or not _S3_CHARS.fullmatch(bucket):
        return (f"bucket {bucket!r} is no S3 bucket name (3 to 63 characters: lowercase letters, digits, '-' and "
                "'.', starting and ending with a letter or digit)")
    if ".." in bucket or _IPV4.fullmatch(bucket):
        return f"bucket {bucket!r} is no S3 bucket name (two adjacent dots, or an IP address)"
    if bucket.startswith(_S3_PREFIXES) or bucket.endswith(_S3_SUFFIXES):
        return f"bucket {bucket!r} is no S3 bucket name (a prefix or suffix AWS reserves)"
    return None
