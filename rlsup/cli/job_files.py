"""`rlsup validate` and `rlsup schema`: check a job file, print the JSON Schema of job files."""
from __future__ import annotations

import argparse
import json

from rlsup import spec as specs


def register(subparsers: argparse._SubParsersAction) -> None:
    validate = subparsers.add_parser("validate", help="check a job file")
    validate.add_argument("job", metavar="JOB.toml", help="the job file to check")
    validate.set_defaults(handler=command_validate)

    schema = subparsers.add_parser("schema", help="print the JSON Schema of job files")
    schema.set_defaults(handler=command_schema)


def command_validate(args: argparse.Namespace) -> int:
    from rlsup.env_check import check_env_file  # imports gymnasium: only a check pays for it

    checked = check_env_file(specs.load(args.job), args.job)
    spec = checked.spec
    network = f", network {checked.network}" if checked.network else ""
    print(f"{args.job}: ok ({spec.job.algo} on {spec.env.id}: {checked.observation} observations, "
          f"{checked.num_actions} actions{network}; {spec.job.total_steps:,} steps)")
    return 0


def command_schema(args: argparse.Namespace) -> int:
    print(json.dumps(specs.json_schema(), indent=2))
    return 0
