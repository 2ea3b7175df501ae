"""`rlsup validate` and `rlsup schema`: check a job file, print the JSON Schema of job files."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlsup import client, spec as specs
from rlsup.spec import experiments
from rlsup.cli.program import ENV_CHECK_IMPORTS, import_quietly
from rlsup.spec.schedule_effects import unused


def register(subparsers: argparse._SubParsersAction) -> None:
    validate = subparsers.add_parser("validate", help="check a job file")
    validate.add_argument("job", metavar="JOB.toml", help="the job file to check")
    validate.set_defaults(handler=command_validate)

    schema = subparsers.add_parser("schema", help="print the JSON Schema of job files")
    schema.set_defaults(handler=command_schema)


def command_validate(args: argparse.Namespace) -> int:
    from rlsup.algos.envs.check import check_env_file  # gymnasium only inside: only a check pays for it

    import_quietly(ENV_CHECK_IMPORTS)

    loaded = specs.load(args.job)
    checked = check_env_file(loaded, args.job)
    spec = checked.spec
    network = f", network {checked.network}" if checked.network else ""
    variants = check_sweep(loaded, Path(args.job))
    # The members are counted at submit (--seeds): here the table is checked as if there were several.
    client.scheduler_of(Path(args.job), Path(args.job).read_text(encoding="utf-8"), loaded, members=2)
    print(f"{args.job}: ok ({spec.job.algo} on {spec.env.id}: {checked.observation} observations, "
          f"{checked.num_actions} actions{network}; {spec.job.total_steps:,} steps)"
          + (f"; [sweep]: {variants} variants checked" if variants else ""))
    for line in unused(spec, args.job):  # valid, but a field set in vain: said, not refused
        print(f"warning: {line}", file=sys.stderr)
    return 0


def check_sweep(loaded: specs.JobSpec, path: Path) -> int:
    """Check every [sweep] variant as submit would (rules, then its env); how many there are (0: no sweep)."""
    from rlsup.algos.envs.check import check_env_file

    text = path.read_text(encoding="utf-8")
    sweep = specs.sweep_of(text, file=str(path))
    if not sweep.fields:
        return 0
    planned = experiments.plan(sweep, None, loaded.job.name)
    experiments.check_variants(loaded, planned, str(path), text)
    for job in planned:
        check_env_file(experiments.variant_spec(loaded, job), path)
    return len(planned)


def command_schema(args: argparse.Namespace) -> int:
    print(json.dumps(specs.json_schema(), indent=2))
    return 0
