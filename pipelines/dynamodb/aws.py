"""Every AWS client ddb2bt makes, with one endpoint rule: a run pointed at a local DynamoDB stays local.

:func:`aws_client` builds the client of any service (``dynamodb``, ``dynamodbstreams``, ``s3``, ``sts``);
:func:`endpoint_for` says which endpoint it gets. For the DynamoDB client:

1. the endpoint given to ddb2bt (``--endpoint-url``, else the spec's ``source.endpoint_url``);
2. else what botocore finds itself: ``AWS_ENDPOINT_URL_DYNAMODB``, ``AWS_ENDPOINT_URL``, the profile's
   ``endpoint_url`` (botocore >= 1.31 reads these; ``AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`` turns them off);
3. else AWS's regional endpoint.

For every other service (DynamoDB Streams, S3, STS):

1. its own variable (``AWS_ENDPOINT_URL_DYNAMODB_STREAMS``, ``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL_STS``);
2. else, when the DynamoDB endpoint of 1./2. above is *local* (any host outside AWS's domains, as
   botocore's partitions list them), that same endpoint: a stream lives on the server that holds its
   table, moto_server serves every service on one port, and a server that lacks a service (dynalite
   has no Streams) answers with an error on this machine rather than the call going to AWS;
3. else what botocore finds (``AWS_ENDPOINT_URL``, the profile), else AWS's regional endpoint.

Beam's S3 file system builds its own client from the pipeline option ``--s3_endpoint_url`` (else botocore's
variables): :func:`s3_beam_args` adds that option by the same rule.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

IGNORE_CONFIGURED = "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"
GLOBAL_VARIABLE = "AWS_ENDPOINT_URL"


# The service ids (botocore's service models, ``metadata.serviceId``) of the services ddb2bt makes clients of, so that
# naming their variables does not load their whole models (S3's alone is a large file to parse);
# tests/pipelines/test_aws_endpoints.py checks them against botocore's models. Any other service is looked up.
SERVICE_IDS = {"dynamodb": "DynamoDB", "dynamodbstreams": "DynamoDB Streams", "s3": "S3", "sts": "STS"}


@functools.lru_cache(maxsize=None)
def service_variable(service: str) -> str:
    """The service's own endpoint variable, named as botocore names it (from the service id, e.g. "DynamoDB Streams")."""
    service_id = SERVICE_IDS.get(service) or botocore_session().get_service_model(service).service_id
    return f"{GLOBAL_VARIABLE}_{service_id.upper().replace(' ', '_').replace('-', '_')}"


@functools.lru_cache(maxsize=None)
def _data_loader(data_path: str | None) -> Any:
    """botocore's data loader, one per data path for the whole process.

    It reads the installed botocore's service models, endpoint rules and partitions (read-only files) and keeps what it
    parsed. A new session gets a loader of its own, so each client of a new session parsed the same JSON again, most
    of what a client costs to make; boto3's default session shares its loader among its clients in the same way.
    """
    from botocore.loaders import create_loader

    return create_loader(data_path)


def botocore_session(profile: str | None = None) -> Any:
    """A new botocore session (configuration and credentials of its own) that reads service data through the shared
    loader. Raises botocore's ``ProfileNotFound`` for an unknown ``profile``, as a new boto3 session does."""
    import botocore.session

    core = botocore.session.Session(profile=profile)
    core.register_component("data_loader", _data_loader(core.get_config_variable("data_path")))
    return core


def boto3_session(profile: str | None = None, region: str | None = None, core: Any = None) -> Any:
    """A new boto3 session over ``core`` (else a new :func:`botocore_session`), as ``boto3.session.Session(
    profile_name=profile, region_name=region)`` makes one, but with the shared data loader."""
    import boto3

    core = core or botocore_session(profile)
    session = boto3.session.Session(botocore_session=core, region_name=region)
    # boto3 adds its own data folder to the loader's search paths with every session: keep one of each
    paths = core.get_component("data_loader").search_paths
    if len(paths) != len(set(paths)):
        paths[:] = list(dict.fromkeys(paths))
    return session


def _configured(name: str) -> str | None:
    if os.environ.get(IGNORE_CONFIGURED, "").strip().lower() == "true":
        return None
    return os.environ.get(name) or None


@functools.lru_cache(maxsize=1)
def _aws_domains() -> tuple[str, ...]:
    """Every DNS suffix of AWS's partitions (amazonaws.com, api.aws, amazonaws.com.cn, ...), from botocore's data."""
    domains: set[str] = set()
    for partition in _data_loader(None).load_data("partitions")["partitions"]:
        outputs = partition.get("outputs", {})
        domains.update(outputs[key] for key in ("dnsSuffix", "dualStackDnsSuffix") if outputs.get(key))
    return tuple(sorted(domains))


def is_local(endpoint: str | None) -> bool:
    """Whether ``endpoint`` is a server outside AWS (loopback, a container, any host not in AWS's domains)."""
    if not endpoint:
        return False
    host = (urlsplit(endpoint if "//" in endpoint else f"//{endpoint}").hostname or "").lower().rstrip(".")
    return bool(host) and not any(host == domain or host.endswith("." + domain) for domain in _aws_domains())


def dynamodb_endpoint(session: Any, endpoint_url: str | None) -> str:
    """The DynamoDB endpoint of this run: the given one, else the one botocore resolves (variables, profile, AWS's)."""
    if endpoint_url:
        return endpoint_url
    from botocore.exceptions import NoRegionError

    try:
        return str(session.client("dynamodb").meta.endpoint_url)
    except NoRegionError:  # no region anywhere: only an endpoint variable can name a server
        return _configured(service_variable("dynamodb")) or _configured(GLOBAL_VARIABLE) or ""


def endpoint_for(service: str, endpoint_url: str | None = None, session: Any = None) -> str | None:
    """The endpoint to hand botocore for ``service`` (None: botocore decides); ``endpoint_url`` is DynamoDB's, as given."""
    if service == "dynamodb":
        return endpoint_url
    if _configured(service_variable(service)):
        return None  # botocore reads the service's own variable
    if session is None:
        session = boto3_session(region=os.environ.get("AWS_REGION") or None)
    dynamodb = dynamodb_endpoint(session, endpoint_url)
    return dynamodb if is_local(dynamodb) else None


def aws_client(service: str, *, endpoint_url: str | None = None, region: str | None = None,
               profile: str | None = None, config: Any = None, role_arn: str | None = None) -> Any:
    """A low-level boto3 client for ``service`` with the endpoint rule above (``endpoint_url``: DynamoDB's, as given).

    Credentials come from the usual chain (variables, profile, instance or workload role), or with ``role_arn``
    from the worker's Google identity exchanged for that role's (:mod:`.aws_web_identity`); nothing here reads or
    logs them.
    """
    from ..run.service_errors import redact

    # boto3 reads AWS_DEFAULT_REGION but not AWS_REGION, which the AWS CLI and SDKs document: honour both.
    region = region or os.environ.get("AWS_REGION") or None
    if role_arn:
        from .web_identity import install

        session = boto3_session(region=region, core=install(botocore_session(profile), role_arn))
    else:
        session = boto3_session(profile, region)
    endpoint = endpoint_for(service, endpoint_url, session)
    client = session.client(service, endpoint_url=endpoint, config=config)
    log.debug("%s client: region=%s endpoint=%s profile=%s", service, session.region_name,
              redact(client.meta.endpoint_url or ""), profile)
    return client


def s3_beam_args(beam_args: list[str] | tuple[str, ...], source: Any) -> list[str]:
    """Beam's arguments, with ``--s3_endpoint_url`` added where the rule gives S3 the local DynamoDB endpoint of
    ``source`` (a ``SourceSpec``, or anything with endpoint_url/region/profile attributes) and none is given."""
    args = list(beam_args)
    if any(arg.split("=", 1)[0] == "--s3_endpoint_url" for arg in args):
        return args
    region = getattr(source, "region", None) or os.environ.get("AWS_REGION") or None
    session = boto3_session(getattr(source, "profile", None), region)
    endpoint = endpoint_for("s3", getattr(source, "endpoint_url", None), session)
    return args + [f"--s3_endpoint_url={endpoint}"] if endpoint else args
