"""`python -m rlsup.daemon`: run the daemon for $RLSUP_HOME in the foreground."""
import sys

from rlsup.daemon.main import run

sys.exit(run(detach=True))
