"""`python -m dashboard.demo DIR` keeps working after the module moved to dashboard.demo.build (for a release)."""

import sys

from dashboard.demo.build import main

sys.exit(main())
