"""Whether an env id names a registered Gymnasium env (ALE games included), with a suggestion when not."""
from __future__ import annotations

import difflib


def unknown_env_id(env_id: str) -> str | None:
    """Why env_id cannot be made, or None when it is registered; imports gymnasium, so call it lazily."""
    import gymnasium as gym

    if env_id.startswith("ALE/"):
        import ale_py  # the ALE games are registered only once ale_py is

        gym.register_envs(ale_py)
    if env_id in gym.registry:
        return None
    close = difflib.get_close_matches(env_id, list(gym.registry), n=1, cutoff=0.6)
    advice = f"; did you mean {close[0]!r}?" if close else " (see gymnasium.pprint_registry())"
    return f"unknown env id {env_id!r}{advice}"
