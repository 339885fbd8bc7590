"""``python -m gym_recorder``: the command line."""

import sys

from .cli import main

sys.exit(main())
