"""``python -m arrowdedup``: the CLI, with a Ctrl-C during start-up handled like any other."""

import sys

from ._interrupt import interrupt_handled  # first, and tiny: the try below guards the rest

try:
    from .cli import main
except KeyboardInterrupt:
    sys.stderr.write("interrupted (Ctrl-C)\n")
    interrupt_handled()
    sys.exit(130)

main()
