"""Chord sparse factorization: kernels, solver and the ChordSF estimator."""
