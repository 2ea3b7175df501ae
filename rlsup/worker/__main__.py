"""`python -m rlsup.worker RUN_DIR`: the job process, its stop signals held before anything else is imported;
`python -m rlsup.worker --fork-server HOME` is the daemon's fork server, whose children are workers."""
from rlsup.run.signals import hold_signals

hold_signals()  # a pause that lands during torch's import waits until the run listens (run/signals.py)

import sys  # noqa: E402  (after the hold, on purpose)

from rlsup.run.fork_protocol import FORK_SERVER_FLAG  # noqa: E402

if sys.argv[1:2] == [FORK_SERVER_FLAG]:
    from rlsup.run.exit import end_process  # noqa: E402
    from rlsup.worker.fork_server import main  # noqa: E402

    sys.exit(end_process(main(sys.argv[2:])))  # no teardown of torch: a second of CPU per server

from rlsup.worker.training import main  # noqa: E402

sys.exit(main())
