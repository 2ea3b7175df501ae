"""Adam and RMSprop with torch.optim's kernels and state_dict format, without its compiler hooks.

torch.optim wraps every optimizer method for torch.compile, and the first call of any of them imports
torch._dynamo: about 0.9 s of CPU in every training process (torch 2.13, x86-64), as much as torch's own
import, paid again on each resume. rlsup never compiles, so its learners step with the same calls torch.optim
makes on its eager path: the fused Adam kernel, RMSprop's multi-tensor formula. The parameters come out
bit-identical to torch.optim's on the CPU (tests/unit/test_optimizers.py), and state_dict() is torch.optim's
format, so checkpoints load either way.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


class EagerOptimizer:
    """One group of parameters with per-parameter state, saved as torch.optim saves it.

    Unlike torch.optim, load_state_dict keeps this optimizer's own hyperparameters and takes only the
    state: a fork's job file may change them, and its values are to be in force from its first step."""

    def __init__(self, parameters: Iterable[nn.Parameter], hyperparameters: dict) -> None:
        self.parameters = list(parameters)
        # One group in torch.optim's shape, so that code which sets group["lr"] works on either.
        self.param_groups = [{**hyperparameters, "params": self.parameters}]
        self.state: dict[nn.Parameter, dict[str, torch.Tensor]] = {}

    @property
    def hyperparameters(self) -> dict:
        return self.param_groups[0]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for parameter in self.parameters:
            if set_to_none:
                parameter.grad = None
            elif parameter.grad is not None:
                parameter.grad.zero_()

    def with_gradients(self) -> list[nn.Parameter]:
        """The parameters a step moves: those with a gradient, each given its state at its first step."""
        moving = [parameter for parameter in self.parameters if parameter.grad is not None]
        for parameter in moving:
            if parameter not in self.state:
                self.state[parameter] = self.initial_state(parameter)
        return moving

    def initial_state(self, parameter: nn.Parameter) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def materialize_state(self) -> None:
        """Every parameter's state now, not at its first step (to share it with a learner process first):
        the same zeros a first step would make, so the steps that follow are the same."""
        for parameter in self.parameters:
            if parameter not in self.state:
                self.state[parameter] = self.initial_state(parameter)

    def state_dict(self) -> dict:
        group = {key: value for key, value in self.hyperparameters.items() if key != "params"}
        group["params"] = list(range(len(self.parameters)))
        return {"state": {index: dict(self.state[parameter]) for index, parameter in enumerate(self.parameters)
                          if parameter in self.state},
                "param_groups": [group]}

    def load_state_dict(self, state: dict) -> None:
        groups = state["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.parameters):
            raise ValueError(f"the saved optimizer state is for {sum(len(group['params']) for group in groups)} "
                             f"parameters in {len(groups)} groups, not {len(self.parameters)} in one")
        self.state = {}
        for index, saved in state["state"].items():
            parameter = self.parameters[int(index)]
            self.state[parameter] = {key: self.placed(key, value, parameter) for key, value in saved.items()}

    def placed(self, key: str, value: torch.Tensor, parameter: nn.Parameter) -> torch.Tensor:
        """A loaded state tensor where torch.optim would put it: moments on the parameter's device and dtype."""
        if key == "step":
            return value
        return value.to(dtype=parameter.dtype, device=parameter.device)


class FusedAdam(EagerOptimizer):
    """torch.optim.Adam(fused=True): one fused kernel call per device and dtype for the whole step."""

    def __init__(self, parameters: Iterable[nn.Parameter], *, lr: float, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        super().__init__(parameters, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": 0, "amsgrad": False,
                                      "maximize": False, "foreach": None, "capturable": False,
                                      "differentiable": False, "fused": True, "decoupled_weight_decay": False})

    def initial_state(self, parameter: nn.Parameter) -> dict[str, torch.Tensor]:
        if not parameter.is_floating_point():
            raise TypeError(f"fused Adam steps floating-point parameters, not {parameter.dtype}")
        # The step count lives beside the parameter as float32, where the fused kernel reads it.
        return {"step": torch.zeros((), dtype=torch.float32, device=parameter.device),
                "exp_avg": torch.zeros_like(parameter, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(parameter, memory_format=torch.preserve_format)}

    def placed(self, key: str, value: torch.Tensor, parameter: nn.Parameter) -> torch.Tensor:
        if key == "step":
            return value.to(dtype=torch.float32, device=parameter.device)
        return super().placed(key, value, parameter)

    @torch.no_grad()
    def step(self) -> None:
        settings = self.hyperparameters
        beta1, beta2 = settings["betas"]
        for parameters in by_device_and_dtype(self.with_gradients()).values():
            states = [self.state[parameter] for parameter in parameters]
            steps = [state["step"] for state in states]
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(parameters, [parameter.grad for parameter in parameters],
                               [state["exp_avg"] for state in states], [state["exp_avg_sq"] for state in states],
                               [], steps, amsgrad=False, lr=settings["lr"], beta1=beta1, beta2=beta2,
                               weight_decay=settings["weight_decay"], eps=settings["eps"], maximize=False)


class RMSprop(EagerOptimizer):
    """torch.optim.RMSprop without weight decay, plain or centered: torch's formula op for op."""

    def __init__(self, parameters: Iterable[nn.Parameter], *, lr: float, alpha: float = 0.99, eps: float = 1e-8,
                 momentum: float = 0.0, centered: bool = False) -> None:
        super().__init__(parameters, {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps,
                                      "centered": centered, "weight_decay": 0, "capturable": False, "foreach": None,
                                      "maximize": False, "differentiable": False})

    def initial_state(self, parameter: nn.Parameter) -> dict[str, torch.Tensor]:
        # The step count stays on the CPU, as torch.optim keeps it when not capturable.
        state = {"step": torch.zeros((), dtype=torch.float32),
                 "square_avg": torch.zeros_like(parameter, memory_format=torch.preserve_format)}
        if self.hyperparameters["momentum"] > 0:
            state["momentum_buffer"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
        if self.hyperparameters["centered"]:
            state["grad_avg"] = torch.zeros_like(parameter, memory_format=torch.preserve_format)
        return state

    def load_state_dict(self, state: dict) -> None:
        """As torch.optim, and a fork that turns momentum or centering on or off gets the buffers it now
        needs as zeros (as its first step would make them) and drops the ones it no longer uses."""
        super().load_state_dict(state)
        for parameter, saved in self.state.items():
            needed = self.initial_state(parameter)
            self.state[parameter] = {key: saved.get(key, needed[key]) for key in needed}

    @torch.no_grad()
    def step(self) -> None:
        # torch.optim's multi-tensor formula, the one it takes on a GPU (fewer kernel launches); on the CPU
        # it is the same elementwise arithmetic as torch's single-tensor path, bit for bit.
        settings = self.hyperparameters
        alpha, eps, momentum, lr = settings["alpha"], settings["eps"], settings["momentum"], settings["lr"]
        for parameters in by_device_and_dtype(self.with_gradients()).values():
            states = [self.state[parameter] for parameter in parameters]
            gradients = [parameter.grad for parameter in parameters]
            square_averages = [state["square_avg"] for state in states]
            torch._foreach_add_([state["step"] for state in states], 1)
            torch._foreach_mul_(square_averages, alpha)
            torch._foreach_addcmul_(square_averages, gradients, gradients, value=1 - alpha)
            if settings["centered"]:
                # The variance about the running mean gradient, not the raw second moment.
                gradient_averages = [state["grad_avg"] for state in states]
                torch._foreach_lerp_(gradient_averages, gradients, 1 - alpha)
                averages = torch._foreach_addcmul(square_averages, gradient_averages, gradient_averages, value=-1)
                torch._foreach_sqrt_(averages)
            else:
                averages = torch._foreach_sqrt(square_averages)
            torch._foreach_add_(averages, eps)
            if momentum > 0:
                buffers = [state["momentum_buffer"] for state in states]
                torch._foreach_mul_(buffers, momentum)
                torch._foreach_addcdiv_(buffers, gradients, averages)
                torch._foreach_add_(parameters, buffers, alpha=-lr)
            else:
                torch._foreach_addcdiv_(parameters, gradients, averages, value=-lr)


def by_device_and_dtype(parameters: list[nn.Parameter]) -> dict[tuple, list[nn.Parameter]]:
    """The parameters grouped as the fused kernel takes them: one call per device and dtype, in their order."""
    groups: dict[tuple, list[nn.Parameter]] = {}
    for parameter in parameters:
        groups.setdefault((parameter.device, parameter.dtype), []).append(parameter)
    return groups
