"""Chord sparse factorization: kernels, solver and the ChordSF estimator."""

#: The modules here that declare methods (:func:`sfapprox._base.methods` imports these alone): the
#: estimator and its kernels load torch, which listing the methods (``info``, a comparison of
#: baselines only) never needs.
METHOD_MODULES = ("methods",)
