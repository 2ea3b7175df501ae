"""Experience replays: transition storage, samplers that pick items, and the mixer that composes them."""
