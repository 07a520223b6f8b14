"""A Dask client from a scheduler address, with the project's one-line errors (dask is optional)."""

from __future__ import annotations

from ._errors import ParameterError, one_line

__all__ = ["connect"]


def connect(scheduler: str, what: str = "--scheduler"):
    """A ``dask.distributed.Client`` connected to ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``).

    Parameters
    ----------
    scheduler : str
        The scheduler's address.
    what : str, default="--scheduler"
        The option that asked for it, for the messages.

    Returns
    -------
    dask.distributed.Client

    Raises
    ------
    ParameterError
        When dask.distributed is not installed, the address is not one, or the scheduler cannot be
        reached within 10 s.
    """
    try:
        from dask.distributed import Client
    except ImportError:
        raise ParameterError(f"{what} needs dask.distributed, an optional extra: pip install 'sfapprox[dask]'") from None
    if not scheduler.strip():
        raise ParameterError(f"{what} needs the scheduler's address (such as tcp://10.0.0.5:8786), got an empty one")
    try:
        return Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise ParameterError(f"cannot connect to the Dask scheduler at {scheduler} ({one_line(exc)})") from None
    except ValueError as exc:  # an address dask cannot parse ("missing port number", a broken IPv6 bracket)
        raise ParameterError(f"{what} {scheduler!r} is not a scheduler address ({one_line(exc)}); give one such "
                             "as tcp://10.0.0.5:8786") from None
