"""Experiments that decide (ASHA, PBT): pure functions from members' reports to decisions, nothing else."""
