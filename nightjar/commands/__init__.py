"""One module per ``nightjar`` sub-command, each exposing ``add_parser`` and ``run``.

``add_parser(sub)`` adds the sub-command's parser to the argparse sub-parsers and
sets ``func=run`` on it; ``run(args) -> int`` returns the exit code. Raise
:class:`nightjar.errors.NightjarInputError` for bad input: the CLI turns it into a
one-line message and exit code 2.
"""
