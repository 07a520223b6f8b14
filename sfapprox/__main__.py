"""``python -m sfapprox``: the same as the ``sfapprox`` console script."""

from .cli import main

if __name__ == "__main__":
    main()
