"""`python -m frontierflow.pipelines.cli`: the `frontierflow` command."""

import sys

from frontierflow.pipelines.cli import main

sys.exit(main())
