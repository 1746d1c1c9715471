"""``python -m pdbq``: the pdbq shell (same as the ``pdbq`` command)."""

from pdbq.api.shell import main

raise SystemExit(main())
