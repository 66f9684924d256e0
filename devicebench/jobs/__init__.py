"""One module per command's orchestration: each job takes keyword arguments whose
defaults are written once, in its signature, and returns a frozen outcome that
serialises itself. The CLI parses, calls one job and renders; ``devicebench.api``
re-exports them."""
