"""`python -m neuronserve` is the same as the `neuronserve` console script."""

from neuronserve.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
