"""`python3 -m kiln.ray resources|attach`: a node's side of joining a Ray cluster."""

import sys

from . import _main

sys.exit(_main())
