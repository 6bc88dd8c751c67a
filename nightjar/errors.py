"""The one exception type that reaches the user as a one-line message."""


class NightjarInputError(Exception):
    """Bad input from the user: a malformed trace, a missing profile, a wrong flag.

    The CLI prints ``str(exc)`` on one line and exits with code 2; raise it with a
    message that names the offending file, field or value.
    """
