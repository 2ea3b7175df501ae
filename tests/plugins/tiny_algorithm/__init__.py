"""A third algorithm from outside rlsup, for the registry test: its registry entry, which imports no torch."""
from rlsup.spec.registry import Algorithm

ALGORITHM = Algorithm("tiny", trainer="tiny_algorithm.training:TinyTrainer",
                      policy="tiny_algorithm.training:policy_from_checkpoint", loss_metric="td_loss",
                      description="online one-step Q-learning on one env, no replay (a test plugin)")
