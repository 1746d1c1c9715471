"""``python -m pdbq``: the pdbq shell (same as the ``pdbq`` command)."""

from pdbq.shell import run

if __name__ == "__main__":  # not when a spawned worker process imports it
    run()
