"""Make a Ctrl-C that the CLI handled end the process with the exit code it chose.

A root module that imports nothing: ``python -m arrowdedup`` imports it before the CLI, outside
the ``try`` that turns a Ctrl-C during the CLI's imports into exit 130 (inside ``arrowdedup.cli``
it would import every command first, unguarded)."""


def interrupt_handled() -> None:
    """Clear CPython's mark of an unhandled KeyboardInterrupt.

    CPython (3.11 at least) marks a KeyboardInterrupt that leaves any ``exec`` or ``eval`` of
    a string as unhandled, even when a caller catches it, and then ends the process by
    re-raising SIGINT on itself instead of returning its exit code (-2 instead of 130).
    ``namedtuple``, ``dataclasses`` and ``typing`` build code that way while modules import,
    so a Ctrl-C landing during the CLI's start-up hit it (3 runs in 80, measured). Each
    ``exec`` of a string that completes clears the mark.
    """
    exec("pass")  # a constant string: only that it completes matters
