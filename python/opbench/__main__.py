"""``python -m opbench``: see ``opbench.cli``."""
import sys

from opbench.cli import main

if __name__ == "__main__":
    sys.exit(main())
