"""`rlsup validate` and `rlsup schema`: check a job file, print the JSON Schema of job files."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from rlsup import spec as specs


def register(subparsers: argparse._SubParsersAction) -> None:
    validate = subparsers.add_parser("validate", help="check a job file")
    validate.add_argument("job", metavar="JOB.toml", help="the job file to check")
    validate.set_defaults(handler=command_validate)

    schema = subparsers.add_parser("schema", help="print the JSON Schema of job files")
    schema.set_defaults(handler=command_schema)


def command_validate(args: argparse.Namespace) -> int:
    spec = specs.load(args.job)
    check_env_id(Path(args.job), spec.env.id)
    print(f"{args.job}: ok ({spec.job.algo} on {spec.env.id}, {spec.job.total_steps:,} steps)")
    return 0


def check_env_id(path: Path, env_id: str) -> None:
    """Refuse an env id that no worker could make, now rather than seconds into the run."""
    from rlsup.envids import unknown_env_id  # imports gymnasium: only validate pays for it

    problem = unknown_env_id(env_id)
    if problem:
        line = specs.locate_keys(path.read_text(encoding="utf-8")).get(("env", "id"))
        raise specs.SpecError([specs.Problem(str(path), line, "env.id", problem)])


def command_schema(args: argparse.Namespace) -> int:
    print(json.dumps(specs.json_schema(), indent=2))
    return 0
