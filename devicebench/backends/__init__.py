"""One module per framework (tensorflow, jax, torch). Imported only in worker processes."""

FRAMEWORKS: tuple[str, ...] = ("tensorflow", "jax", "torch")

# The distribution(s) whose presence means the framework is installed.
FRAMEWORK_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tensorflow-intel",
                   "tf-nightly"),
    "jax": ("jax",),
    "torch": ("torch",),
}
