"""``python -m rtolab`` runs the ``rtolab`` command."""

from rtolab.cli import main

main()
