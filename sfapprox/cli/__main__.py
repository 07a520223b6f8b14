"""``python -m sfapprox.cli``: the same as the ``sfapprox`` console script."""

from . import main

if __name__ == "__main__":
    main()
