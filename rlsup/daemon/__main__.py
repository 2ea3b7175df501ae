"""`python -m rlsup.daemon`: run the daemon for $RLSUP_HOME in the foreground."""
import sys

from rlsup.daemon.process import run
from rlsup.hardware import machine_from_environment

sys.exit(run(machine=machine_from_environment(), detach=True))
