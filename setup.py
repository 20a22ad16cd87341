"""The package list, found rather than kept by hand (everything else is in pyproject.toml).

gpucluster and gpucluster_agents are folders of the same name; the Pulumi components and the templates are the
top-level folders components/ and templates/, installed under gpucluster (pyproject.toml's package-dir maps the
names). A plain find from the top would take components/ as a top-level package of its own, so each root is searched
on its own and its packages are named where they install.
"""

from setuptools import find_packages, setup


def found(folder: str, name: str) -> list[str]:
    return [name, *(f"{name}.{sub}" for sub in find_packages(folder))]


setup(
    packages=[
        *found("gpucluster", "gpucluster"),
        *found("gpucluster_agents", "gpucluster_agents"),
        *found("components", "gpucluster.components"),
        "gpucluster.templates",  # data only: pyproject.toml's package-data takes every template under it
    ]
)
