"""``python -m autograder`` and the ``autograder`` console script: see :mod:`autograder.cli`."""

import sys

from autograder import cli


def main() -> int:
    return cli.main(sys.argv[1:], as_command=True)


if __name__ == "__main__":
    sys.exit(main())
