"""A job's env checked before it is queued (validate, submit, run): made once, its spaces judged, its network resolved.

Torch-free; gymnasium is imported inside check_env only, so the CLI and client stay light until they check.
"""
from __future__ import annotations

import dataclasses
import os
import site
import sys
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING

from rlsup import spec as specs
from rlsup.spec import registry
from rlsup.spec.locating import Located
from rlsup.spec.rules import logits_distance_violations

if TYPE_CHECKING:
    from rlsup.algos.envs.actions import ActionSpace


@dataclasses.dataclass(frozen=True)
class CheckedEnv:
    """The spec with its "auto" network resolved, and what the check saw, for one line of report."""

    spec: specs.JobSpec
    observation: str
    actions: ActionSpace
    network: str | None  # None: the algorithm has no [<algo>] network field

    @property
    def num_actions(self) -> int:
        return self.actions.count


def check_env(spec: specs.JobSpec, file: str, text: str) -> CheckedEnv:
    """Make the env, reset it and take one step, as a worker would; raise SpecError naming file, line and
    field when it cannot train.

    Refused: ids nothing registers, modules of [env] imports that fail, composite action spaces or Boxes
    rlsup cannot squash into (actions.py), actions of a kind [job] algo does not train (continuous ones for
    dqn), observation spaces other than a Box of a vector or an image, a network that does not fit the
    observation, and an env whose reset or first step raises (the old Gym API) or returns what a worker
    would refuse (algos/env_faults.py). Imports gymnasium (and the env's own packages)."""
    from rlsup.algos.envs.faults import TRACEBACK_NOTE
    from rlsup.algos.envs.sources import EnvError, EnvImportError
    from rlsup.algos.envs.training import take_first_step
    from rlsup.algos.envs.observations import NetworkError, network_for

    located = Located(file, text)
    try:
        description = take_first_step(spec.env)
    except EnvError as error:
        path = ("env", "imports") if isinstance(error, EnvImportError) else ("env", "id")
        raise specs.SpecError([located.problem(path, str(error).removesuffix(TRACEBACK_NOTE))]) from None
    _check_action_kind(spec, description.actions, located)
    distances = logits_distance_violations(spec.replay, description.actions.continuous)
    if distances:
        raise specs.SpecError([located.problem(violation.path, violation.message) for violation in distances])
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
    return CheckedEnv(spec, f"{observation.kind} {shape} {observation.dtype}", description.actions, network)


def _check_action_kind(spec: specs.JobSpec, actions: ActionSpace, located: Located) -> None:
    """SpecError at [job] algo when it does not train this env's kind of actions, naming those that do."""
    kinds = registry.get(spec.job.algo).action_kinds
    if actions.kind in kinds:
        return
    fitting = " or ".join(f'"{name}"' for name in registry.algorithm_names()
                          if actions.kind in registry.get(name).action_kinds)
    advice = f"use algo = {fitting}" if fitting else f"no algorithm installed trains {actions.kind} actions"
    message = (f"env id {spec.env.id!r} has {actions.kind} actions ({actions.describe()}); algo "
               f"{spec.job.algo!r} trains {' and '.join(kinds)} ones: {advice}")
    raise specs.SpecError([located.problem(("job", "algo"), message)])


def check_env_file(spec: specs.JobSpec, path: str | Path) -> CheckedEnv:
    """check_env for a job file on disk, located in its own text."""
    return check_env(spec, str(path), Path(path).read_text(encoding="utf-8"))


def import_roots(env: specs.EnvSection) -> list[str]:
    """The sys.path entries this process found the env's own modules in ([env] imports, a module:Env-v0 id's
    module), once check_env has imported them; entries of the interpreter's own (its standard library and
    site-packages, which every worker has) are left out. A daemon started without the submitting shell's
    PYTHONPATH gives its workers these (runfiles.write_import_paths)."""
    names = [*env.imports, *filter(None, [env.id.rpartition(":")[0]])]
    own = {os.path.realpath(directory) for directory in interpreter_directories()}
    roots: list[str] = []
    for name in names:
        root = module_root(sys.modules.get(name), name)
        if root is not None and os.path.realpath(root) not in own and root not in roots:
            roots.append(root)
    return roots


def module_root(module: object, name: str) -> str | None:
    """The directory module was imported from as `name`: its file's, up one per dot of the name, and one more
    for a package's __init__.py. None for a module without a file (a namespace package, a built-in)."""
    file = getattr(module, "__file__", None)
    if not file:
        return None
    location = Path(file).absolute().parent
    ups = name.count(".") + (Path(file).name == "__init__.py")
    for _ in range(ups):
        location = location.parent
    return str(location)


def interpreter_directories() -> list[str]:
    paths = sysconfig.get_paths()
    user_site = [site.getusersitepackages()] if site.ENABLE_USER_SITE else []
    return [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")] + site.getsitepackages() + user_site
