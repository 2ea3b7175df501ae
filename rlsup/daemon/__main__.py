"""`python -m rlsup.daemon`: run the daemon for $RLSUP_HOME in the foreground."""
import sys

from rlsup.daemon.demo import machine_from_environment
from rlsup.daemon.process import run

sys.exit(run(machine=machine_from_environment(), detach=True))
