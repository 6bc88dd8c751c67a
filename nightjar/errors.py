"""The one exception type that reaches the user as a one-line message."""

# A message longer than this is cut: one line on a terminal, not a dump of the input.
MAX_MESSAGE_CHARS = 2000


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped, and bounded."""
    out = "".join(
        c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii")
        for c in text
    )
    return out if len(out) <= MAX_MESSAGE_CHARS else out[: MAX_MESSAGE_CHARS - 3] + "..."


class NightjarInputError(ValueError):
    """Bad input from the user: a malformed trace, a missing profile, a wrong flag.

    A ``ValueError``, so that code which already catches bad values from the Python API
    catches these too.

    The CLI prints ``str(exc)`` on one line and exits with code 2; raise it with a
    message that names the offending file, field or value. Whatever the message holds
    (a key or a value copied from the input), it is stored as one bounded line.
    """

    def __init__(self, message: object = "") -> None:
        super().__init__(one_line(str(message)))
