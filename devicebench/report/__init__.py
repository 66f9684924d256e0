"""Renderers (terminal, JSON, HTML). They format data; they never compute it."""
