"""Entry point of the component provider (``python gpucluster/tools/provider <engine address>``, as
``PulumiPlugin.yaml``'s ``main`` runs it; or ``python -m gpucluster.tools.provider``)."""

from gpucluster.tools.provider import main

if __name__ == "__main__":
    main()
