"""Baselines compared with SF at an equal budget of stored numbers."""
