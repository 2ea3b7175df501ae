"""A job's env checked before it is queued (validate, submit, run): made once, its spaces judged, its network resolved.

Torch-free; gymnasium is imported inside check_env only, so the CLI and client stay light until they check.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from rlsup import spec as specs
from rlsup.spec.locating import Located


@dataclasses.dataclass(frozen=True)
class CheckedEnv:
    """The spec with its "auto" network resolved, and what the check saw, for one line of report."""

    spec: specs.JobSpec
    observation: str
    num_actions: int
    network: str | None  # None: the algorithm has no [<algo>] network field


def check_env(spec: specs.JobSpec, file: str, text: str) -> CheckedEnv:
    """Make the env once as a worker would; raise SpecError naming file, line and field when it cannot train.

    Refused: ids nothing registers, modules of [env] imports that fail, continuous or composite action
    spaces, observation spaces other than a Box of a vector or an image, and a network that does not fit
    the observation. Imports gymnasium (and the env's own packages).
    """
    from rlsup.algos.env_sources import EnvError, EnvImportError, describe_env
    from rlsup.algos.observations import NetworkError, network_for

    located = Located(file, text)
    try:
        description = describe_env(spec.env)
    except EnvError as error:
        path = ("env", "imports") if isinstance(error, EnvImportError) else ("env", "id")
        raise specs.SpecError([located.problem(path, str(error))]) from None
    observation = description.observation
    section = getattr(spec, spec.job.algo, None) if spec.job.algo in specs.TABLES else None
    network = None
    if section is not None and hasattr(section, "network"):
        try:
            network = network_for(section.network, observation.shape)
        except NetworkError as error:
            raise specs.SpecError([located.problem((spec.job.algo, "network"), str(error))]) from None
        spec = spec.replace(spec.job.algo, network=network)
    shape = "x".join(str(side) for side in observation.shape)
    return CheckedEnv(spec, f"{observation.kind} {shape} {observation.dtype}", description.num_actions, network)


def check_env_file(spec: specs.JobSpec, path: str | Path) -> CheckedEnv:
    """check_env for a job file on disk, located in its own text."""
    return check_env(spec, str(path), Path(path).read_text(encoding="utf-8"))
