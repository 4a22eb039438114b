"""``python -m zkop`` is the ``zkop`` command."""

from zkop.cmd.main import main

if __name__ == "__main__":
    raise SystemExit(main())
