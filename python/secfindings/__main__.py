"""``python -m secfindings``: the command line (see :mod:`secfindings.cli`)."""

from secfindings.cli import main

main(prog_name="secfindings")
