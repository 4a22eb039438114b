"""``python -m hack.bench``: run the benchmark (see :mod:`hack.bench`)."""

from __future__ import annotations

import sys

from .runner import main

sys.exit(main())
