"""Checkpoints of a run: atomic writes, manifests with checksums, verification, rotation and RNG states."""
