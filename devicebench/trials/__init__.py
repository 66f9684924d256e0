"""Trials: specs, results, the worker entry point and launchers."""
