"""Measurement machinery: the analytic graph walk, the timing harness, memory, per-operator
traces, summaries and artifacts. Heavy frameworks are imported inside functions only."""
