"""``python -m flowledger``: the command line."""

from flowledger.cli import main

if __name__ == "__main__":
    main()
