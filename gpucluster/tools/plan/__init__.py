"""The offline plan: run a Pulumi program under mocks, show what it would create, compare two plans.

Three families, one folder each; a module's name says what it does inside its family.

``run/`` — running the program and recording it
    ``engine``        :func:`~.run.engine.run_plan` / :func:`~.run.engine.execute`: the program under the mocks → a :class:`~.run.engine.Plan`
    ``stackfile``     ``Pulumi.yaml`` and ``Pulumi.<stack>.yaml`` read as the Pulumi CLI does (also for preflight and ``bundle``)
    ``mocks``         the mock providers: fake resources and the invokes a program makes (:mod:`.run.lookups` answers the common ones)
    ``lookups``       the data-source invokes a Pulumi user writes (subnets, VPCs, security groups, AMIs, identity, region)
    ``fakes``         the made-up ids, ARNs and provider state per resource type
    ``monitor``       the recording monitor: parents, protection, inputs, dependencies and outputs of every registration
    ``files``         the rendered files a plan carries (user data decoded, the agent package summarized)
    ``placeholders``  what each made-up value stands for ("(id of X, assigned at create)"), for the text plan
    ``json``          the plan as the JSON document ``--json``, the golden files and ``plan diff`` read

``show/`` — the plan as a person reads it
    ``report``        the text plan: summary, tree, estimate, findings, outputs, files
    ``summary``       the cluster in a dozen lines (also the pull-request comment's table)
    ``estimate``      the estimate section
    ``program_estimate``  the estimate of any plan: the stack's own, else one worked out from the resources
                      of gpucluster's components a program of your own registered
    ``tree``, ``describe``  the resource tree and one line per resource type
    ``files``, ``outputs``  the rendered files and the stack outputs as text
    ``mermaid``       a picture of the cluster (the pull-request comment)
    ``colour``        colour where a person reads it

``diff/`` — two plans compared (``gpucluster plan diff``)
    ``changes``       the steps: create / update / replace / delete / same per resource
    ``carry``         a replacement carried to the resources whose inputs reference the replaced one
    ``safety/``       the update-safety table: what replaces a resource, what holds data (``hybrid``: a site's link)
    ``disruption``    what a change does to running work
    ``cost``          the cost and power delta
    ``step``          the data the renderers read
    ``text``, ``markdown``, ``json``  the diff as text, as a pull-request comment, as ``pulumi preview --json``
    ``review``        one review: the comparison, the cost delta and the summary, in a format, with its exit status

``schemas/`` holds the JSON schemas of the plan and the diff documents (docs/plan-json.md).
"""
