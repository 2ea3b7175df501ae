"""A test plugin that reports GPU memory as a CUDA learner would, on a CPU build: its registry entry."""
from rlsup.spec.registry import Algorithm

ALGORITHM = Algorithm("gpumem", trainer="gpu_memory_algorithm.training:GpuMemoryTrainer",
                      policy="tiny_algorithm.training:policy_from_checkpoint", loss_metric="td_loss",
                      description="the tiny algorithm, reporting a chosen GPU memory figure (a test plugin)")
