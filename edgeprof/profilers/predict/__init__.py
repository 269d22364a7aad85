"""Predicted latency on targets that cannot be measured here: per-kernel calibrations."""
