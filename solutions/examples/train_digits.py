"""`python -m solutions.examples.train_digits`: the same as `python -m solutions.training` (kept for
old links; the library lives in solutions/training.py)."""
from solutions.training import *  # noqa: F401,F403
from solutions.training import main

if __name__ == "__main__":
    main()
