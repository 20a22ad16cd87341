"""Running a Pulumi program under mocks and recording what it registers (see :mod:`gpucluster.tools.plan`)."""
