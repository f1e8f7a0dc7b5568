"""``python -m srcgrad``: the command-line tool (see ``srcgrad --help``)."""
from .cli import main

raise SystemExit(main())
