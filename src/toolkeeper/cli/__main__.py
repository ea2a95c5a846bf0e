"""``python -m toolkeeper.cli`` (the same as the ``toolkeeper`` command)."""

from toolkeeper.cli import main

main()
