"""`withruntime`: the public runtime API's import name for the kiln SDK. Every name is
kiln's own object (`withruntime.Runtime is kiln.Runtime`)."""

from kiln import *  # noqa: F401,F403
from kiln import RuntimeError, __all__, __version__, gym, rewards  # noqa: F401,A004
