"""AWS credentials for a machine on Google Cloud (a Dataflow worker): its Google identity, exchanged for an AWS role.

The worker asks the GCE metadata server for a Google-signed identity token of its service account
and gives it to AWS STS ``AssumeRoleWithWebIdentity`` for temporary credentials of ``role_arn``.
Renewal is botocore's own: the credentials are botocore ``DeferredRefreshableCredentials`` fed by
botocore's ``AssumeRoleWithWebIdentityCredentialFetcher``, whose token loader fetches a fresh identity
token each time (a token lives an hour, a static token file would go stale). Every client made from
a session with :func:`install` renews before the credentials expire, as botocore does for its own
web-identity provider.

The metadata host is ``metadata.google.internal`` unless ``GCE_METADATA_HOST`` says otherwise (the
variable Google's own client libraries read). The STS client is botocore's, so it honours
``AWS_ENDPOINT_URL_STS`` / ``AWS_ENDPOINT_URL``. Neither the token nor the credentials are ever logged.

Also a ``credential_process`` for any other AWS client in the process (Beam's own S3 file system makes
its clients from a fresh session): ``python -m ddb2bt.pipelines.dynamodb.web_identity --role-arn ARN`` prints
the credentials in the format the AWS config file's ``credential_process`` reads (see docs/DATAFLOW.md).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ...mappers.errors import ServiceError

METADATA_HOST = "metadata.google.internal"
IDENTITY_PATH = "/computeMetadata/v1/instance/service-accounts/default/identity"
METHOD = "custom-google-web-identity"
"""The provider's name in botocore (custom providers' canonical names start with "custom", botocore asks)."""
SESSION_NAME = "ddb2bt"
DEFAULT_AUDIENCE = "sts.amazonaws.com"
"""The `aud` asked for in the Google token: the role's trust policy can require it (``accounts.google.com:oaud``)."""


class MetadataServerError(ServiceError):
    """The GCE metadata server gave no identity token (not on Google Cloud, or no service account)."""


def metadata_host() -> str:
    return os.environ.get("GCE_METADATA_HOST") or METADATA_HOST


def identity_token(audience: str = DEFAULT_AUDIENCE, timeout: float = 5.0) -> str:
    """A Google-signed ID token of this machine's service account, from the metadata server (``format=full``:
    it carries the project and instance claims, which a trust policy may check)."""
    query = urllib.parse.urlencode({"audience": audience, "format": "full"})
    url = f"http://{metadata_host()}{IDENTITY_PATH}?{query}"
    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - a fixed http URL
            token = response.read().decode("ascii").strip()
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", None) or err
        raise MetadataServerError(
            f"no Google identity token from the metadata server at {metadata_host()} ({reason})",
            "--aws-role-arn works on Google Cloud machines (Dataflow workers) whose service account may sign "
            "identity tokens; elsewhere use the usual AWS credentials") from None
    if token.count(".") != 2:  # a JWT; anything else is not what the server should answer (never echoed)
        raise MetadataServerError(f"the metadata server at {metadata_host()} answered something that is no "
                                  "identity token", "check GCE_METADATA_HOST")
    return token


def refreshable_credentials(role_arn: str, client_creator: Any, *, audience: str = DEFAULT_AUDIENCE,
                            duration_seconds: int | None = None) -> Any:
    """botocore credentials for ``role_arn``, fetched on first use and renewed by botocore before they expire.

    ``client_creator`` makes the STS client (``botocore.session.Session.create_client``); the call is unsigned.
    """
    from botocore.credentials import DeferredRefreshableCredentials

    fetcher = _fetcher(role_arn, client_creator, audience, duration_seconds)
    return DeferredRefreshableCredentials(method=METHOD, refresh_using=fetcher.fetch_credentials)


def _fetcher(role_arn: str, client_creator: Any, audience: str, duration_seconds: int | None = None) -> Any:
    from botocore.credentials import AssumeRoleWithWebIdentityCredentialFetcher

    extra: dict[str, Any] = {"RoleSessionName": SESSION_NAME}
    if duration_seconds is not None:
        extra["DurationSeconds"] = duration_seconds
    return AssumeRoleWithWebIdentityCredentialFetcher(
        client_creator=client_creator,
        web_identity_token_loader=lambda: identity_token(audience),
        role_arn=role_arn,
        extra_args=extra,
    )


def _provider_class() -> type:
    from botocore.credentials import CredentialProvider

    class GoogleWebIdentityProvider(CredentialProvider):
        """botocore credential provider: this machine's Google identity, exchanged for ``role_arn``."""

        METHOD = METHOD
        CANONICAL_NAME = "customGoogleWebIdentity"

        def __init__(self, role_arn: str, client_creator: Any, audience: str) -> None:
            self._role_arn, self._client_creator, self._audience = role_arn, client_creator, audience

        def load(self) -> Any:
            return refreshable_credentials(self._role_arn, self._client_creator, audience=self._audience)

    return GoogleWebIdentityProvider


def install(botocore_session: Any, role_arn: str, *, audience: str = DEFAULT_AUDIENCE) -> Any:
    """Make ``role_arn``, assumed with this machine's Google identity, the credentials of ``botocore_session``
    (first in its chain, ahead of environment keys and profiles); returns the session."""
    provider = _provider_class()(role_arn, botocore_session.create_client, audience)
    botocore_session.get_component("credential_provider").insert_before("env", provider)
    return botocore_session


def credential_process_output(role_arn: str, *, audience: str = DEFAULT_AUDIENCE) -> str:
    """The JSON a ``credential_process`` prints (Version 1): fresh credentials of ``role_arn``."""
    import botocore.session

    fetched = _fetcher(role_arn, botocore.session.Session().create_client, audience).fetch_credentials()
    return json.dumps({"Version": 1, "AccessKeyId": fetched["access_key"], "SecretAccessKey": fetched["secret_key"],
                       "SessionToken": fetched["token"], "Expiration": fetched["expiry_time"]})


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m ddb2bt.pipelines.dynamodb.web_identity",
                                     description="credential_process: AWS credentials for this machine's Google "
                                                 "identity (GCE metadata server + STS AssumeRoleWithWebIdentity)")
    parser.add_argument("--role-arn", required=True)
    parser.add_argument("--audience", default=DEFAULT_AUDIENCE)
    args = parser.parse_args(argv)
    try:
        print(credential_process_output(args.role_arn, audience=args.audience))
    except ServiceError as err:
        print(err.one_line(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
