"""How a worker's log records are routed: worker.log gets every one, a foreground run's terminal those meant for it."""
from __future__ import annotations

# A record for worker.log only: a foreground run's terminal hears the outcome once, from tell_terminal.
# The worker, its env processes and its actors all log this way, so it lives below all three.
FILE_ONLY = {"terminal": False}
