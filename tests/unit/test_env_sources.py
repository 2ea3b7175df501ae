"""Env sources: any registered Gymnasium env with Discrete actions and a Box observation, in one layout."""
from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlsup import spec as specs
from rlsup.algos.envs.sources import EnvError, EnvImportError, describe_env
from rlsup.algos.envs.training import make_env, probe_env
from rlsup.algos.nets import (DSiLU, MlpTorso, NatureTorso, SmallConvTorso, as_float, build_q_network,
                              channels_last)
from rlsup.algos.envs.observations import NetworkError, layout_of, network_for
from rlsup.spec import EnvSection
from user_envs import DICT_ID, PACKAGE, PICTURE_ID, WALK_ID, write_package

MINATAR = EnvSection(id="MinAtar/Breakout-v1")


@pytest.fixture
def user_envs(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(write_package(tmp_path)))
    return tmp_path


# -- the layout rule ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape, dtype, image_layout, kind, canonical, storage", [
    ((4,), np.float64, "auto", "vector", (4,), np.float32),
    ((8,), np.bool_, "auto", "vector", (8,), np.float32),
    ((10, 10, 4), np.bool_, "auto", "image", (4, 10, 10), np.uint8),     # MinAtar: channels last
    ((10, 10, 10), np.bool_, "auto", "image", (10, 10, 10), np.uint8),   # a tie reads as channels last
    ((4, 84, 84), np.uint8, "auto", "image", (4, 84, 84), np.uint8),     # channels first
    ((64, 64, 3), np.float32, "auto", "image", (3, 64, 64), np.float32),
    ((3, 64, 64), np.float64, "hwc", "image", (64, 3, 64), np.float32),  # said outright
    ((84, 84, 4), np.uint8, "chw", "image", (84, 84, 4), np.uint8),
    ((7, 9), np.uint8, "auto", "image", (1, 7, 9), np.uint8),            # one channel
])
def test_layout_rule(shape, dtype, image_layout, kind, canonical, storage):
    layout = layout_of(shape, dtype, stacked=False, image_layout=image_layout)
    assert (layout.kind, layout.shape, layout.dtype) == (kind, canonical, np.dtype(storage))
    assert layout.convert(np.zeros(shape, dtype)).shape == canonical
    assert layout.stack_size == 1 and layout.frame_shape == canonical


def test_atari_stacks_keep_their_layout():
    layout = layout_of((4, 84, 84), np.uint8, stacked=True)
    assert (layout.kind, layout.shape, layout.stack_size, layout.frame_shape) == ("stack", (4, 84, 84), 4, (84, 84))


def test_hwc_bool_images_become_chw_intensities():
    image = np.random.default_rng(0).random((10, 10, 4)) < 0.3
    converted = layout_of(image.shape, np.bool_, stacked=False).convert(image)
    assert converted.dtype == np.uint8 and converted.flags.c_contiguous
    assert np.array_equal(converted, np.moveaxis(image, 2, 0).astype(np.uint8) * 255)


def test_a_four_dimensional_box_is_neither_vector_nor_image():
    with pytest.raises(NetworkError, match="neither a vector"):
        layout_of((2, 3, 4, 5), np.float32, stacked=False)


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 10, 4)])
def test_an_observation_holding_no_values_is_refused(shape):
    """A Box of shape (0,) passed validate, then failed in the worker reshaping the replay's empty rows."""
    with pytest.raises(NetworkError) as refused:
        layout_of(shape, np.float32, stacked=False)
    assert str(refused.value) == f"an observation of shape {shape} holds no values to learn from"


# -- the network rule -------------------------------------------------------------------------------


@pytest.mark.parametrize("shape, network", [
    ((4,), "mlp"), ((4, 84, 84), "nature_cnn"), ((3, 36, 36), "nature_cnn"), ((4, 10, 10), "small_cnn"),
    ((3, 35, 64), "small_cnn"), ((1, 2, 9), "mlp"),
])
def test_auto_follows_the_observation(shape, network):
    assert network_for("auto", shape) == network
    build_q_network(shape, 3, [8], network)(torch.zeros((2, *shape), dtype=torch.uint8))  # and it runs


@pytest.mark.parametrize("network, shape, message", [
    ("nature_cnn", (4, 10, 10), "at least 36x36.*4 channels of 10x10"),
    ("small_cnn", (8,), "at least 3x3.*a vector of 8"),
])
def test_a_network_that_does_not_fit_is_refused(network, shape, message):
    with pytest.raises(NetworkError, match=message):
        network_for(network, shape)


def test_an_explicit_choice_is_kept():
    assert network_for("mlp", (4, 84, 84)) == "mlp"
    assert network_for("small_cnn", (4, 84, 84)) == "small_cnn"


def test_torsos_scale_intensities_and_take_floats_as_they_are():
    torch.manual_seed(0)
    torso = SmallConvTorso(4, 10, 10)
    ones = torch.ones((1, 4, 10, 10))
    assert torch.equal(torso(torch.full((1, 4, 10, 10), 255, dtype=torch.uint8)), torso(ones))
    assert NatureTorso(3, 64, 64)(torch.zeros((2, 3, 64, 64))).shape == (2, 512)
    intensities = torch.arange(256, dtype=torch.uint8)
    assert torch.equal(as_float(intensities), intensities / 255.0)  # every byte's quotient, to the bit


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_the_channel_by_channel_reorder_equals_torchs_and_leaves_the_network_bit_for_bit(dtype, channels):
    generator = torch.Generator().manual_seed(channels)
    images = torch.randint(0, 256, (5, channels, 84, 84), dtype=torch.uint8, generator=generator).to(dtype)
    reordered = channels_last(images)
    assert reordered.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(reordered, images)
    assert reordered.stride() == images.contiguous(memory_format=torch.channels_last).stride()
    torch.manual_seed(0)
    torso = NatureTorso(channels)
    # What the torso computed before the reorder was its own: torch's one call, then the same layers.
    assert torch.equal(torso(images), torso.layers(as_float(images.contiguous(memory_format=torch.channels_last))))
    transposed = images.permute(0, 1, 3, 2)  # neither layout contiguous: still copied by value
    assert torch.equal(channels_last(transposed), transposed)


def test_silu_torsos_put_silu_after_inner_layers_and_its_derivative_after_the_last():
    points = torch.linspace(-6, 6, 49, requires_grad=True)
    (slope,) = torch.autograd.grad(torch.nn.functional.silu(points).sum(), points)
    assert torch.allclose(DSiLU()(points.detach()), slope, atol=1e-6)
    kinds = [type(layer).__name__ for layer in SmallConvTorso(4, 10, 10, activation="silu").layers]
    assert kinds == ["Conv2d", "SiLU", "Flatten", "Linear", "DSiLU"]
    assert [type(layer).__name__ for layer in MlpTorso(4, [8, 8], "silu").layers] == ["Linear", "SiLU", "Linear",
                                                                                     "DSiLU"]
    assert [type(layer).__name__ for layer in MlpTorso(4, [8, 8]).layers][1::2] == ["ReLU", "ReLU"]
    # The same parameters under the same names: one checkpoint layout whatever the units.
    assert NatureTorso(4, activation="silu").state_dict().keys() == NatureTorso(4).state_dict().keys()


# -- real envs ----------------------------------------------------------------------------------------


def test_minatar_observations_are_chw_intensities_of_its_own_state():
    env = make_env(MINATAR, seed=3)  # registers the MinAtar/ ids through MinAtar's entry point
    raw = gym.make("MinAtar/Breakout-v1", disable_env_checker=True)
    state, _ = raw.reset(seed=3)
    observation = env.reset()
    assert observation.shape == (4, 10, 10) and observation.dtype == np.uint8
    assert np.array_equal(observation, np.moveaxis(state, 2, 0).astype(np.uint8) * 255)
    for action in [0, 1, 2, 1]:
        state = raw.step(action)[0]
        assert np.array_equal(env.step(action).observation, np.moveaxis(state, 2, 0).astype(np.uint8) * 255)
    assert probe_env(MINATAR) == ((4, 10, 10), np.dtype(np.uint8), 3, 1)
    assert env.newest_frame(observation) is observation and env.frame_shape == (4, 10, 10)


def test_lunarlander_is_a_vector_env():
    description = describe_env(EnvSection(id="LunarLander-v3"))
    assert (description.observation.kind, description.observation.shape, description.num_actions) == \
        ("vector", (8,), 4)


def test_an_env_package_named_in_imports_registers_its_envs(user_envs):
    walk = make_env(EnvSection(id=WALK_ID, imports=[PACKAGE]), seed=0)
    assert walk.reset().dtype == np.float32 and walk.num_actions == 2
    picture = make_env(EnvSection(id=PICTURE_ID, imports=[PACKAGE]), seed=0)
    assert picture.observation_shape == (2, 3, 6) and picture.observation_dtype == np.uint8
    assert probe_env(EnvSection(id=PICTURE_ID, imports=[PACKAGE]))[0] == (2, 3, 6)  # a list field, still cached


def test_a_module_colon_id_imports_its_module(user_envs):
    assert make_env(EnvSection(id=f"{PACKAGE}:{WALK_ID}"), seed=0).num_actions == 2


def test_an_import_that_fails_is_named():
    with pytest.raises(EnvImportError, match="'no_such_env_package' .*\\[env\\] imports.*ModuleNotFoundError"):
        make_env(EnvSection(id="CartPole-v1", imports=["no_such_env_package"]), seed=0)


@pytest.mark.parametrize("settings, message", [
    (EnvSection(id=DICT_ID, imports=[PACKAGE]), f"'{DICT_ID}' has the observation space Dict"),
    (EnvSection(id="FrozenLake-v1"), "'FrozenLake-v1' has the observation space Discrete"),
    (EnvSection(id="UserEnvs/Nothing-v0"), "unknown env id 'UserEnvs/Nothing-v0'"),
])
def test_spaces_rlsup_cannot_train_are_refused_by_name(settings, message, user_envs):
    with pytest.raises(EnvError, match=message):
        describe_env(settings)


# -- the spec -----------------------------------------------------------------------------------------


def test_imports_must_be_module_names():
    with pytest.raises(specs.SpecError, match=r"<string>:3: env.imports: 'my-envs' is not a Python module name"):
        specs.loads('[env]\nid = "CartPole-v1"\nimports = ["my-envs"]\n')


def test_a_file_saying_auto_matches_the_network_its_run_recorded():
    resolved = specs.JobSpec().replace("dqn", network="small_cnn")
    edited = specs.JobSpec().replace("job", total_steps=5)
    assert [change.field for change in specs.diff(resolved, edited)] == ["job.total_steps"]
    assert specs.settle(resolved, edited).dqn.network == "small_cnn"
    assert specs.refused(specs.diff(resolved, edited.replace("dqn", network="mlp")))


def test_an_env_section_is_described_once_per_process(monkeypatch):
    """`rlsup run` checks the env, then its worker sizes replays and networks from it: one env made, not two."""
    import rlsup.algos.envs.sources as sources

    made, make_stack = [], sources.make_stack
    monkeypatch.setattr(sources, "make_stack", lambda *arguments: made.append(1) or make_stack(*arguments))
    section = EnvSection(id="Acrobot-v1", max_episode_steps=77)  # a section no other test describes
    assert describe_env(section) == describe_env(EnvSection(id="Acrobot-v1", max_episode_steps=77))
    assert probe_env(section)[2] == 3 and len(made) == 1
    describe_env(EnvSection(id="Acrobot-v1", max_episode_steps=78))
    assert len(made) == 2


def test_minatar_loads_seaborn_and_pyplot_only_when_it_draws() -> None:
    """MinAtar imports seaborn (scipy, pandas) and pyplot for rendering alone: a process that makes its envs
    to train pays for them only once something draws, and then drawing works as before. torch is imported
    after the env, as a worker does: its import looks through every module in sys.modules for a __file__."""
    pytest.importorskip("minatar")
    code = """
import sys
import gymnasium as gym
from rlsup.algos.envs.training import make_env
from rlsup.spec import EnvSection
env = make_env(EnvSection(id="MinAtar/Breakout-v1"), seed=1)
env.reset()
env.step(0)
import torch
print(sorted(name for name in ("scipy", "pandas", "seaborn.palettes") if name in sys.modules))
drawn = gym.make("MinAtar/Breakout-v1", render_mode="rgb_array")
drawn.reset(seed=1)
print(drawn.render().shape, "seaborn.palettes" in sys.modules)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "(10, 10, 3) True"], result.stdout
