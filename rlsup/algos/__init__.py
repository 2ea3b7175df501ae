"""Training algorithms, their networks and the environments they learn from."""
