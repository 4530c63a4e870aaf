"""``python -m anyreduce``: the command line."""

import sys

from anyreduce._cli import main

sys.exit(main())
