"""Advice: equivalence checks, candidate search and explanations.

(Named `advisor`, not `advise`, so that the subpackage never shadows the public
function `devicebench.advise`.)
"""
