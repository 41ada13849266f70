"""``python -m opbench``: see ``opbench.integrations.cli``."""
import sys

from opbench.integrations.cli import main

if __name__ == "__main__":
    sys.exit(main())
