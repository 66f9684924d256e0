"""devicebench: is my accelerator actually speeding up my training, and why?

Public API (no deep-learning framework is imported by importing this package).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
