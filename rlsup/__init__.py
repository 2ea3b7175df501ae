"""rlsup: a job supervisor for reinforcement-learning training on local GPU boxes."""

__version__ = "0.1.0"
