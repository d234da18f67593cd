"""``python -m ferrolock``: the ``ferrolock`` command line."""

import sys

from ferrolock.cli import main

sys.exit(main())
