"""``python -m gpucluster.tools.ci.planmany PROJECT_DIR OUT_DIR STACK…``: plan several stacks of one checkout in
one process and write ``OUT_DIR/<stack>.json``. The preview runs it for the base while it plans the head itself,
so the two sides (and their imports of Pulumi and the providers) use both cores of a CI runner at once."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    from gpucluster.tools.plan.run.engine import run_plan
    from gpucluster.tools.plan.run.json import to_json

    project_dir, out, *stacks = argv
    Path(out).mkdir(parents=True, exist_ok=True)
    for stack in stacks:
        doc = to_json(run_plan(stack, Path(project_dir)))
        (Path(out) / f"{stack}.json").write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
