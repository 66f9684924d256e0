"""Advice: equivalence checks, candidate search and explanations."""
