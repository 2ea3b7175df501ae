"""`python -m rlsup.cli`: the rlsup command, as the console script runs it."""
import sys

from rlsup.cli import main

sys.exit(main())
