"""The scaling tests' helpers now live in tests/conftest.py (import them from there); this name
stays only so that tests written against it keep importing."""
from conftest import REPO, epoch_csv, scalelab  # noqa: F401
