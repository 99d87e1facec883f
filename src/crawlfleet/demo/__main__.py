"""``python -m crawlfleet.demo``: serve the demo shop (options as ``crawlfleet.demo.server``)."""

from __future__ import annotations

import contextlib
import sys

from crawlfleet.demo.server import main

if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
