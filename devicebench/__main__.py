"""``python -m devicebench``."""

from devicebench.cli import main

if __name__ == "__main__":
    main()
