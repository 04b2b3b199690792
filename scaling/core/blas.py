"""Run fits with single-threaded BLAS.

The fits make thousands of tiny (5-dimensional) BLAS calls inside scipy's L-BFGS-B. With a
multi-threaded OpenBLAS on a busy 2-core machine each call pays a thread hand-off, which made
a bootstrap ~50x slower (measured). threadpoolctl (a scikit-learn dependency) limits the pools
for the duration of a fit; without it, this is a no-op.
"""

from __future__ import annotations

import contextlib
import functools

import numpy  # noqa: F401  (loads numpy's OpenBLAS, which threadpoolctl then limits)


@contextlib.contextmanager
def single_threaded_blas():
    try:
        from threadpoolctl import threadpool_limits  # optional: absent, the fit runs as it is
    except ImportError:  # pragma: no cover - optional
        yield
        return
    # threadpoolctl only limits libraries already loaded: load scipy's OpenBLAS first (deferred: slow to import).
    import scipy.linalg
    import scipy.optimize  # noqa: F401

    with threadpool_limits(limits=1, user_api="blas"):
        yield


def blas_single_thread(fn):
    """Decorator form of `single_threaded_blas` for public fit functions."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with single_threaded_blas():
            return fn(*args, **kwargs)

    return wrapper
