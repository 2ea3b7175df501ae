"""`python -m rlsup.cli`: the rlsup command, as the console script runs it."""
import sys

from rlsup.cli import main

code = main()
# A Ctrl-C that main() answered may have landed inside a string exec() of some library's import (dataclasses,
# namedtuple); CPython then notes an "unhandled" KeyboardInterrupt even though it was caught, and under -m,
# not under the console script, ends the process by SIGINT instead of with our code. A string exec resets
# that note (CPython's run_eval_code_obj clears it before every such eval).
exec("")
sys.exit(code)
