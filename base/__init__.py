"""What every layer shares, below models: the user-error type and the strict config base."""
