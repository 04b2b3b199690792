"""What every fit shares and that knows no law: user errors, the bootstrap, compute and parameter
conventions, the Huber and likelihood objectives, the multi-start optimiser, single-threaded BLAS,
which runs a fit sees (selection), what it reports about itself (diagnostics), least squares."""
