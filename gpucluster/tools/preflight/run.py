"""Run every preflight check: a check whose AWS calls fail adds a "could not check …" warning naming what it
looks at and the config it is about, and the others still run; missing credentials stop everything."""

from __future__ import annotations

from gpucluster.config.cluster import ClusterSpec
from gpucluster.config.errors import Finding, warning
from gpucluster.facts.catalog import Catalog
from gpucluster.tools.preflight.clients import Clients
from gpucluster.tools.preflight.cluster import (
    Check,
    check_file_system,
    check_offerings,
    check_quotas,
    check_reservations,
    check_subnets,
)
from gpucluster.tools.preflight.hybrid import HYBRID_CHECKED
from gpucluster.tools.preflight.identity import IDENTITY_CHECKED
from gpucluster.tools.preflight.images import IMAGES_CHECKED
from gpucluster.tools.preflight.routes import ROUTES_CHECKED

CHECKS: tuple[Check, ...] = (
    check_offerings,
    check_reservations,
    check_subnets,
    check_file_system,
    check_quotas,
    *IMAGES_CHECKED,
    *HYBRID_CHECKED,
    *ROUTES_CHECKED,
    *IDENTITY_CHECKED,
)

# What each check looks at, and the config it is about: named in "could not check …" findings.
CHECKED: dict[Check, tuple[str, str]] = {
    check_offerings: ("instance type offerings per zone", "gpucluster:nodeGroups"),
    check_reservations: ("capacity reservations and blocks", "gpucluster:nodeGroups"),
    check_subnets: ("bring-your-own subnets", "gpucluster:network.subnets"),
    check_file_system: ("the existing FSx file system", "gpucluster:storage.lustre.fileSystemId"),
    check_quotas: ("vCPU quotas", "gpucluster:nodeGroups"),
    **IMAGES_CHECKED,
    **HYBRID_CHECKED,
    **ROUTES_CHECKED,
    **IDENTITY_CHECKED,
}


class NoCredentials(Exception):
    """boto3 found no AWS credentials: nothing can be checked (the CLI prints one line, exit 1)."""


def failure_reason(exc: Exception) -> str:
    """One line for an AWS call that failed: the error code and message, or the exception's text."""
    response = getattr(exc, "response", None)
    if isinstance(response, dict) and isinstance(response.get("Error"), dict):
        err = response["Error"]
        code, message = err.get("Code") or "error", err.get("Message") or ""
        return f"{code}: {message}" if message else str(code)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def preflight(spec: ClusterSpec, catalog: Catalog, aws: Clients) -> list[Finding]:
    """Every check's findings. A check whose AWS calls fail (access denied, an API the endpoint does not
    support, a network error) adds a "could not check …" warning and the others still run; missing
    credentials stop everything with :class:`NoCredentials`."""
    from botocore.exceptions import NoCredentialsError, PartialCredentialsError

    findings: list[Finding] = []
    for check in CHECKS:
        try:
            for finding in check(spec, catalog, aws):
                findings.append(finding)
        except (NoCredentialsError, PartialCredentialsError) as exc:
            raise NoCredentials(str(exc)) from None
        except Exception as exc:  # any failure of one check is reported; the rest go on
            what, path = CHECKED.get(check, (check.__name__, "gpucluster"))
            findings.append(
                warning(
                    path,
                    f"could not check {what}: {failure_reason(exc)}",
                    "check the credentials' permissions and the endpoint, then run preflight again; "
                    "`pulumi up` will meet the same problem if this call is not allowed",
                    None,
                    "check-failed",
                )
            )
    return findings
