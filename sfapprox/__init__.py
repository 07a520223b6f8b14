"""sfapprox: Chord sparse factorization of square matrices, compared at equal budget."""
from ._errors import (
    BudgetError,
    ConvergenceWarning,
    DeviceError,
    InputError,
    NotApplicableError,
    ParameterError,
    ResourceError,
    SfapproxError,
)

__version__ = "0.1.0"
