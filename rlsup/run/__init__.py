"""A run directory and the worker contract: its files, signals, spec watch, fault stacks, forks."""
