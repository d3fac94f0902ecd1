"""``python -m uet.tools.bench``: the same as ``uet-bench``."""

import sys

from uet.tools.bench import main

sys.exit(main())
