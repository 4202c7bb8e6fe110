"""The errors of the libraries ddb2bt talks through (botocore, google.api_core, google.auth), as ddb2bt errors.

:func:`as_ddb2bt_error` is the one place that knows them. It decides by ``isinstance`` and
imports nothing: a library's exception classes are looked up only if that library is already
loaded (an error cannot come from a library that was never imported), so the CLI's error
handler stays light.
"""

from __future__ import annotations

import re
import sys

from ...mappers.errors import Ddb2btError, ServiceError, UsageError, recover

AWS_CREDENTIALS_HINT = "configure AWS credentials (environment, `aws configure`, --profile, or an instance role)"
GOOGLE_CREDENTIALS_HINT = ("run `gcloud auth application-default login`, use a service account with Bigtable access, "
                           "or set BIGTABLE_EMULATOR_HOST for the emulator")

_DYNAMODB_NOT_FOUND = "check the table name, --aws-region and --endpoint-url"
_AWS_DENIED = ("AccessDeniedException", "UnrecognizedClientException", "InvalidSignatureException",
               "ExpiredTokenException", "MissingAuthenticationTokenException", "AccessDenied", "InvalidAccessKeyId",
               "SignatureDoesNotMatch", "ExpiredToken")


_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/@:'\"]*)(?P<password>:[^\s/'\"]*)?@")


def redact(text: str) -> str:
    """``text`` with the credentials of any URL in it masked: `http://user:pw@host` becomes `http://user:***@host`
    (a user name alone, often a token, becomes `***`). Every error line and every endpoint shown goes through here."""
    return _USERINFO.sub(lambda m: f"{m['scheme']}{m['user'] + ':' if m['password'] else ''}***@", text)


_STEP_SUFFIX = re.compile(r" \[while running '[^']*'\]")  # as mappers.errors strips it from ddb2bt errors


def as_ddb2bt_error(error: BaseException) -> Ddb2btError | None:
    """``error`` as a ddb2bt error (kept if it is one, found again behind Beam's wrapping), or None for a bug.

    A library's error is translated with any URL's credentials masked (see :func:`redact`); the CLI masks
    every line it renders as well."""
    found = recover(error)
    if found is not None:
        return found
    translated = _botocore(error) or _google(error) or _beam_s3(error) or _os(error)
    if translated is None:
        return None
    # a library's error re-raised by Beam carries " [while running 'Step']": the step is no news to a user
    text = redact(_STEP_SUFFIX.sub("", str(translated)))
    if text == str(translated):
        return translated
    return type(translated)(text)  # plain UsageError / ServiceError: message only


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def _botocore(error: BaseException) -> Ddb2btError | None:
    exceptions = sys.modules.get("botocore.exceptions")
    if exceptions is None:
        return None
    if isinstance(error, exceptions.ClientError):
        details = error.response.get("Error", {})
        code, message = details.get("Code", "ClientError"), details.get("Message", str(error))
        operation = getattr(error, "operation_name", "") or "request"
        if code in ("ResourceNotFoundException", "NoSuchBucket", "NoSuchKey", "404"):
            return UsageError(f"AWS {operation}: {message or code}", _DYNAMODB_NOT_FOUND)
        if code in _AWS_DENIED:
            return ServiceError(f"AWS {operation} refused ({code}): {message}",
                                f"{AWS_CREDENTIALS_HINT}; the identity needs dynamodb:DescribeTable and dynamodb:Scan")
        return ServiceError(f"AWS {operation} failed ({code}): {message}")
    if isinstance(error, exceptions.PartialCredentialsError):  # the user's settings, half made: no service asked
        missing, where = error.kwargs.get("cred_var", "the rest"), error.kwargs.get("provider", "your settings")
        return UsageError(_one_line(error), f"set {missing} too, or remove the half-set credentials from {where} so "
                                            "the next source in AWS's chain (--profile, an instance role) is used")
    if isinstance(error, exceptions.NoCredentialsError):
        return ServiceError(_one_line(error), AWS_CREDENTIALS_HINT)
    if isinstance(error, exceptions.ProfileNotFound):
        return UsageError(_one_line(error), "check --profile / AWS_PROFILE")
    if isinstance(error, exceptions.NoRegionError):
        return UsageError(_one_line(error), "pass --aws-region or set AWS_REGION")
    if isinstance(error, (exceptions.EndpointConnectionError, exceptions.ConnectTimeoutError,
                          exceptions.ReadTimeoutError, exceptions.ConnectionClosedError)):
        return ServiceError(_one_line(error), "check --endpoint-url, your network, and that DynamoDB is reachable")
    if isinstance(error, exceptions.BotoCoreError):
        return ServiceError(_one_line(error))
    return None


def _google(error: BaseException) -> Ddb2btError | None:
    api = sys.modules.get("google.api_core.exceptions")
    auth = sys.modules.get("google.auth.exceptions")
    if auth is not None and isinstance(error, auth.DefaultCredentialsError):
        return ServiceError("no Google credentials found", GOOGLE_CREDENTIALS_HINT)
    if api is None:
        return None
    if _from_storage(error):
        return _storage_error(error, api)
    # google-cloud-bigtable's timeout text lacks a space: "operation_timeoutof 10.0s exceeded"
    message = re.sub(r"\boperation_timeout(?=of )", "operation_timeout ",
                     _first_line(getattr(error, "message", None) or str(error)))
    if isinstance(error, api.NotFound):
        return UsageError(f"Bigtable: {message}", "check --project, --instance and target.table")
    if isinstance(error, (api.PermissionDenied, api.Unauthenticated)):
        return ServiceError(f"Bigtable refused the request ({type(error).__name__}): {message}",
                            f"{GOOGLE_CREDENTIALS_HINT}; the identity needs roles/bigtable.user "
                            "(roles/bigtable.admin to create the table)")
    if isinstance(error, (api.ServiceUnavailable, api.DeadlineExceeded, api.RetryError)):
        return ServiceError(f"Bigtable is unreachable or too slow ({type(error).__name__}): {message}",
                            "check the instance, your network, or BIGTABLE_EMULATOR_HOST for the emulator")
    if isinstance(error, api.InvalidArgument):
        return UsageError(f"Bigtable refused the request: {message}")
    if isinstance(error, api.GoogleAPIError):
        return ServiceError(f"Bigtable: {type(error).__name__}: {message}")
    return None


_STORAGE_MODULES = ("google.cloud.storage", "google.resumable_media", "apache_beam.io.gcp.gcsio",
                    "apache_beam.io.gcp.gcsfilesystem")
STORAGE_HINT = ("check --temp_location and --staging_location (gs://BUCKET/folder: a bucket that exists, which the "
                "job's identity can write), --run-dir, your network and Google credentials")


def _from_storage(error: BaseException) -> bool:
    """Whether ``error`` (or one it was raised from) came out of Google Cloud Storage's client or Beam's GCS I/O:
    the same google.api_core classes as Bigtable's, told apart by where they were raised or the host they name."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if "storage.googleapis.com" in str(current):
            return True
        traceback = current.__traceback__
        while traceback is not None:
            if str(traceback.tb_frame.f_globals.get("__name__", "")).startswith(_STORAGE_MODULES):
                return True
            traceback = traceback.tb_next
        current = current.__cause__ or current.__context__
    return False


def _storage_error(error: BaseException, api: object) -> Ddb2btError:
    message = _first_line(getattr(error, "message", None) or str(error))
    kind = type(error).__name__
    if isinstance(error, getattr(api, "NotFound")):
        return UsageError(f"Google Storage: {message}", STORAGE_HINT)
    refused = tuple(getattr(api, name) for name in ("PermissionDenied", "Unauthenticated", "Forbidden", "Unauthorized"))
    if isinstance(error, refused):  # Cloud Storage's JSON API answers 401/403 (Unauthorized, Forbidden)
        return ServiceError(f"Google Storage refused the request ({kind}): {message}",
                            f"{STORAGE_HINT}; the identity needs roles/storage.objectAdmin on the bucket")
    return ServiceError(f"Google Storage is unreachable or failed ({kind}): {message}", STORAGE_HINT)


def _first_line(text: str) -> str:
    return " ".join(text.strip().splitlines()[0].split()) if text.strip() else text


S3_HINT = ("check the s3:// paths (--run-dir, --dead-letter, source.export.path: a bucket that exists, which these "
           "credentials can use), AWS_ENDPOINT_URL_S3 and your AWS credentials")


def _beam_s3(error: BaseException) -> Ddb2btError | None:
    """Beam's S3 file system wraps botocore's errors in its own class (an HTTP status as ``code``): a missing bucket or
    key is the user's path (exit 2), a refusal or anything else the service's (exit 3). It was 'a bug'."""
    messages = sys.modules.get("apache_beam.io.aws.clients.s3.messages")
    if messages is None or not isinstance(error, messages.S3ClientError):
        return None
    text = error.message if isinstance(error.message, str) else str(error)
    message = _first_line(text) or type(error).__name__
    if error.code == 404:
        return UsageError(f"S3: {message}", S3_HINT)
    if error.code in (401, 403):
        return ServiceError(f"S3 refused the request: {message}", S3_HINT)
    return ServiceError(f"S3: {message}", S3_HINT)


def _os(error: BaseException) -> Ddb2btError | None:
    if isinstance(error, OSError) and not isinstance(error, (ConnectionError, TimeoutError)):
        where = f"{error.filename}: " if error.filename is not None else ""
        return UsageError(f"{where}{error.strerror or _one_line(error)}")
    if isinstance(error, (ConnectionError, TimeoutError)):
        return ServiceError(_one_line(error))
    return None


GCS_HOST = "storage.googleapis.com"
REACH_SECONDS = 10.0
"""How long a look at Cloud Storage's address may take (its name resolved, then a TCP connection): on a network that
reaches it, well under a second."""


def gcs_unreachable(path: str) -> ServiceError | None:
    """For a gs:// path, a ServiceError at once when Cloud Storage cannot be reached from here (its name does not
    resolve, or nothing answers on its port), else None (a local path, an emulator, a proxy, a network that reaches it).

    Without it a gs:// path on a machine with no network waited two minutes (google.auth's retries for credentials,
    then the storage client's retries of a name that never resolves) before a RetryError, whose hint named
    --temp_location. Asked once per process: the answer is the network's, not the path's."""
    if not path.startswith("gs://"):
        return None
    import os

    if any(os.environ.get(name) for name in ("STORAGE_EMULATOR_HOST", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                                               "all_proxy")):
        return None  # the client goes elsewhere first: its own errors say what is wrong there
    problem = _gcs_reach_problem()
    if problem is None:
        return None
    return ServiceError(f"cannot read {path}: Google Cloud Storage ({GCS_HOST}) cannot be reached from here: {problem}",
                        "check this machine's network (or HTTPS_PROXY), or copy the files here and give their local "
                        "folder")


_REACHED: list[str | None] = []


def _gcs_reach_problem() -> str | None:
    if _REACHED:
        return _REACHED[0]
    import socket
    import threading

    found: list[str | None] = []

    def look() -> None:  # getaddrinfo takes no timeout: a thread that outlives the wait is left to end by itself
        try:
            with socket.create_connection((GCS_HOST, 443), timeout=REACH_SECONDS):
                found.append(None)
        except socket.gaierror as err:
            found.append(f"its name does not resolve ({err.strerror or err})")
        except OSError as err:
            found.append(f"no connection to port 443 ({err.strerror or type(err).__name__})")

    thread = threading.Thread(target=look, name="ddb2bt-gcs-reach", daemon=True)
    thread.start()
    thread.join(REACH_SECONDS)
    problem = found[0] if found else f"no answer within {REACH_SECONDS:g} s"
    _REACHED.append(problem)
    return problem


def s3_credentials_missing(path: str, options: object = None) -> ServiceError | None:
    """For an s3:// path, a ServiceError at once when no AWS credentials can be found the way Beam's S3 file system
    looks for them (its ``--s3_access_key_id``, else boto3's default chain), else None.

    Without it Beam's S3 client retried "Unable to locate credentials" (an error with no HTTP status, which its retry
    filter takes for a server's) for eight minutes, then raised its own ``exists() operation failed with exceptions
    {...}``. Half-set credentials raise botocore's PartialCredentialsError, which says which half is missing."""
    if not path.startswith("s3://"):
        return None
    view = getattr(options, "view_as", None)
    if view is not None:
        from apache_beam.options.pipeline_options import S3Options

        if view(S3Options).s3_access_key_id:
            return None
    import boto3

    if boto3.session.Session().get_credentials() is not None:
        return None
    return ServiceError(f"cannot read {path}: no AWS credentials found", AWS_CREDENTIALS_HINT)
