import sys

from autograder.kit import main

sys.exit(main())
