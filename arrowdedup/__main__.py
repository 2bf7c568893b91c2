"""``python -m arrowdedup``: the CLI, with a Ctrl-C during start-up handled like any other."""

import sys

try:
    from .cli import main
except KeyboardInterrupt:
    sys.stderr.write("interrupted (Ctrl-C)\n")
    sys.exit(130)

main()
