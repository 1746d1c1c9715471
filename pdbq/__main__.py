"""``python -m pdbq``: the pdbq shell (same as the ``pdbq`` command)."""

from pdbq.shell import main

raise SystemExit(main())
