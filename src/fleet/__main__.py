"""``python -m fleet`` is the ``fleet`` command."""

import sys

from fleet._cli import main

sys.exit(main())
