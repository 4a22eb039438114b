"""``python -m zkop`` is the ``zkop`` command."""

from zkop.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
