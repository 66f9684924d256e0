"""Measurement: statistics on raw samples; the timed protocol lives in the worker."""
