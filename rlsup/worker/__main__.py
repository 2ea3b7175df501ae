"""`python -m rlsup.worker RUN_DIR`: the job process, its stop signals held before anything else is imported."""
from rlsup.run.signals import hold_signals

hold_signals()  # a pause that lands during torch's import waits until the run listens (run/signals.py)

import sys  # noqa: E402  (after the hold, on purpose)

from rlsup.worker.training import main  # noqa: E402

sys.exit(main())
