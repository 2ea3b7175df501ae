"""`rlsup validate` and `rlsup schema`: check a job file, print the JSON Schema of job files."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rlsup import spec as specs
from rlsup.spec import experiments
from rlsup.jobs.admission import JudgedFile, judge_file
from rlsup.cli.arguments import CliError, experiment_options
from rlsup.cli.program import ENV_CHECK_IMPORTS, import_quietly
from rlsup.spec.schedule_effects import unused


def register(subparsers: argparse._SubParsersAction) -> None:
    validate = subparsers.add_parser("validate", help="check a job file as rlsup submit with the same options would")
    validate.add_argument("job", metavar="JOB.toml", help="the job file to check")
    experiment_options(validate)
    validate.set_defaults(handler=command_validate)

    schema = subparsers.add_parser("schema", help="print the JSON Schema of job files")
    schema.set_defaults(handler=command_schema)


def command_validate(args: argparse.Namespace) -> int:
    from rlsup.algos.envs.check import check_env_file  # gymnasium only inside: only a check pays for it

    import_quietly(ENV_CHECK_IMPORTS)

    path = Path(args.job)
    try:
        seeds = experiments.parse_seeds(args.seeds) if args.seeds is not None else None
        judged = judge_file(path, seeds=seeds, experiment=args.experiment)  # as submit judges it
    except experiments.SeedsError as error:
        raise CliError(str(error)) from None
    checked = check_env_file(judged.loaded, args.job)
    spec = checked.spec
    network = f", network {checked.network}" if checked.network else ""
    variants = check_variants(judged, path)
    print(f"{args.job}: ok ({spec.job.algo} on {spec.env.id}: {checked.observation} observations, "
          f"{checked.actions.describe()}{network}; {spec.job.total_steps:,} steps)"
          + (f"; [sweep]: {variants} variants checked" if variants > 1 else ""))
    for line in unused(spec, args.job):  # valid, but a field set in vain: said, not refused
        print(f"warning: {line}", file=sys.stderr)
    return 0


def check_variants(judged: JudgedFile, path: Path) -> int:
    """Make the env of every distinct variant of an experiment, as submit does; how many there are."""
    from rlsup.algos.envs.check import check_env_file

    variants = {tuple(sorted((name, repr(value)) for name, value in job.values.items()
                           if name not in experiments.NOT_VARIANT)): job
                for job in judged.planned}
    for job in variants.values():
        check_env_file(experiments.variant_spec(judged.loaded, job), path)
    return len(variants)


def command_schema(args: argparse.Namespace) -> int:
    print(json.dumps(specs.json_schema(), indent=2))
    return 0
