"""The boto3 clients preflight's checks use (every module of :mod:`gpucluster.tools.preflight`), in a module of
their own so the checks' modules need not import the runner that imports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Clients:
    """The boto3 clients preflight uses (pointed at moto in the tests)."""

    ec2: Any
    fsx: Any
    quotas: Any
    acm_pca: Any = None
    rolesanywhere: Any = None
    secretsmanager: Any = None
    kms: Any = None
    iam: Any = None
    sts: Any = None

    @classmethod
    def create(cls, region: str, endpoint_url: str | None = None) -> Clients:
        import boto3

        def make(service: str) -> Any:
            return boto3.client(service, region_name=region, endpoint_url=endpoint_url)

        return cls(
            ec2=make("ec2"),
            fsx=make("fsx"),
            quotas=make("service-quotas"),
            acm_pca=make("acm-pca"),
            rolesanywhere=make("rolesanywhere"),
            secretsmanager=make("secretsmanager"),
            kms=make("kms"),
            iam=make("iam"),
            sts=make("sts"),
        )
