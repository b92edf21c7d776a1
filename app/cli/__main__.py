"""`python -m app.cli …`: the `omniforge` command."""

import sys

from app.cli import main

sys.exit(main())
