"""``python -m jobtrail.dashboard``: the documented entry point of ``jobtrail.web.dashboard``."""

from ..web.dashboard.__main__ import main

if __name__ == "__main__":
    main()
