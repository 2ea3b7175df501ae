"""A user's own env package, written into a temporary directory: importing it registers its envs with Gymnasium."""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE = "rlsup_user_envs"
WALK_ID = "UserEnvs/Walk-v0"        # a vector, Discrete(2): walk right to the goal
PICTURE_ID = "UserEnvs/Picture-v0"  # an HWC bool image of the same walk, Discrete(2)
DICT_ID = "UserEnvs/Dict-v0"        # a Dict observation, which rlsup refuses
# The walk, faulty from the second step of each env's third episode on: long after training has begun.
FAULTY_IDS = {"raise": "UserEnvs/Raises-v0", "nan": "UserEnvs/NanObservation-v0",
              "huge reward": "UserEnvs/HugeReward-v0", "shape": "UserEnvs/WrongShape-v0",
              "segfault": "UserEnvs/Segfault-v0",  # reads address 0, as a C++ simulator's bug would
              "child segfault": "UserEnvs/ChildSegfault-v0"}  # only in an env process or a V-trace actor
FAULT_MESSAGE = "the simulator lost its licence ü\n  (see /opt/simulateur/log)"  # two lines, as C++ errors are
HEAVY_ID = "UserEnvs/Heavy-v0"      # the walk, each env holding 8 MiB of memory
UNMADE_ID = "UserEnvs/Unmade-v0"    # its constructor raises
UNMADE_MESSAGE = "no licence file at /opt/simulateur/licence.txt"
# The old Gym API, still common in researchers' own envs: reset without seed, and step with four values.
OLD_RESET_ID = "UserEnvs/OldReset-v0"
OLD_STEP_ID = "UserEnvs/OldStep-v0"
# The walk, noting at each reset in $RLSUP_TEST_SUBNORMAL_LOG its pid, whether its process flushes subnormal
# floats to zero, and whether it is rlsup's check of the env: which of a run's processes run in [job]
# flush_denormals' mode.
SUBNORMAL_ID = "UserEnvs/Subnormal-v0"
SUBNORMAL_LOG_VARIABLE = "RLSUP_TEST_SUBNORMAL_LOG"

SOURCE = '''"""Deterministic test envs, registered when this package is imported."""
import gymnasium as gym
import numpy as np
from gymnasium.spaces import Box, Dict, Discrete

LENGTH = 6


class Walk(gym.Env):
    """A corridor of LENGTH cells: action 1 steps right, 0 left; reaching the right end pays 1 and ends it."""

    observation_space = Box(0.0, 1.0, (2,), np.float32)
    action_space = Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = int(self.np_random.integers(0, 2))
        return self._observation(), {{}}

    def step(self, action):
        self.position = max(0, self.position + (1 if action == 1 else -1))
        done = self.position >= LENGTH - 1
        return self._observation(), float(done), done, False, {{}}

    def _observation(self):
        return np.array([self.position / (LENGTH - 1), 1.0], np.float32)


class Picture(Walk):
    """The same walk seen as a (3, LENGTH, 2) bool image, height first: row 1 marks the position."""

    observation_space = Box(0, 1, (3, LENGTH, 2), bool)

    def _observation(self):
        image = np.zeros((3, LENGTH, 2), bool)
        image[1, self.position, 0] = True
        image[:, :, 1] = True
        return image


class WithDict(Walk):
    observation_space = Dict({{"position": Box(0.0, 1.0, (2,), np.float32)}})

    def _observation(self):
        return {{"position": super()._observation()}}


def in_child_process():
    """An env process (python -c) or a spawned V-trace actor, not the worker."""
    import multiprocessing
    import sys
    return sys.argv[0] == "-c" or multiprocessing.parent_process() is not None


class Faulty(Walk):
    """The walk until the second step of its third episode; from there on, the fault FAULT names."""

    FAULT = ""

    def reset(self, *, seed=None, options=None):
        self.episodes, self.steps = getattr(self, "episodes", 0) + 1, 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        observation, reward, terminated, truncated, info = super().step(action)
        self.steps += 1
        if self.episodes < 3 or self.steps < 2:
            return observation, reward, terminated, truncated, info
        if self.FAULT == "raise":
            raise RuntimeError({fault_message!r})
        if self.FAULT == "nan":
            observation = np.array([np.nan, 1.0], np.float32)
        elif self.FAULT == "huge reward":
            reward = 1e39
        elif self.FAULT == "shape":
            observation = np.zeros(3, np.float32)
        elif self.FAULT == "segfault" or (self.FAULT == "child segfault" and in_child_process()):
            import ctypes
            ctypes.string_at(0)
        return observation, reward, terminated, truncated, info


for fault, env_id in {faulty_ids!r}.items():
    faulty = type("Faulty" + fault.title().replace(" ", ""), (Faulty,), {{"FAULT": fault}})
    gym.register(env_id, entry_point=faulty, max_episode_steps=20)
class Heavy(Walk):
    """The walk, with 8 MiB of memory of its own (written, so resident): a simulator's state, say."""

    def __init__(self):
        self.state = np.ones(2**20)


class Unmade(Walk):
    def __init__(self):
        raise FileNotFoundError({unmade_message!r})


class Subnormal(Walk):
    def reset(self, *, seed=None, options=None):
        import os
        import traceback
        flushed = np.float32(1e-20) * np.float32(1e-20) == 0  # 1e-40 is below float32's normal range
        # rlsup's check of a job's env steps a copy of it before any run starts: not one of the run's envs.
        checking = any(frame.name == "check_env" for frame in traceback.extract_stack())
        with open(os.environ["{subnormal_log}"], "a") as log:
            log.write(f"{{os.getpid()}} {{int(flushed)}} {{'check' if checking else 'run'}}\\n")
        return super().reset(seed=seed, options=options)


class OldReset(Walk):
    def reset(self):
        self.position = 0
        return self._observation()


class OldStep(Walk):
    def step(self, action):
        observation, reward, terminated, _, info = super().step(action)
        return observation, reward, terminated, info


gym.register("{old_reset}", entry_point=OldReset)
gym.register("{old_step}", entry_point=OldStep)
gym.register("{heavy}", entry_point=Heavy, max_episode_steps=20)
gym.register("{subnormal}", entry_point=Subnormal, max_episode_steps=20)
gym.register("{unmade}", entry_point=Unmade, max_episode_steps=20)
gym.register("{walk}", entry_point=Walk, max_episode_steps=20)
gym.register("{picture}", entry_point=Picture, max_episode_steps=20)
gym.register("{dict}", entry_point=WithDict, max_episode_steps=20)
'''


def write_package(directory: Path) -> Path:
    """The package's directory, to put on sys.path or PYTHONPATH; it registers WALK_ID, PICTURE_ID, DICT_ID."""
    package = Path(directory) / PACKAGE
    package.mkdir(parents=True, exist_ok=True)
    source = SOURCE.format(walk=WALK_ID, picture=PICTURE_ID, dict=DICT_ID, fault_message=FAULT_MESSAGE,
                           faulty_ids=FAULTY_IDS, heavy=HEAVY_ID,
                           unmade=UNMADE_ID, unmade_message=UNMADE_MESSAGE, old_reset=OLD_RESET_ID,
                           old_step=OLD_STEP_ID, subnormal=SUBNORMAL_ID, subnormal_log=SUBNORMAL_LOG_VARIABLE)
    (package / "__init__.py").write_text(source, encoding="utf-8")
    return Path(directory)


def with_python_path(directory: Path) -> str:
    """PYTHONPATH with directory in front of what it already holds (the checkout under test)."""
    return os.pathsep.join([str(directory), *filter(None, [os.environ.get("PYTHONPATH")])])
