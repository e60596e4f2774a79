"""The native module: meshsim's command line, run in this process."""

from typing import List, Optional, Tuple

def invoke(args: List[str]) -> Tuple[int, str, Optional[Tuple[str, str, str]]]:
    """Runs ``meshsim ARGS...``; returns ``(code, stdout, failure)``, ``failure`` being ``None``
    or ``(kind, message, report)`` with ``kind`` in ``"input"``, ``"simulation"``,
    ``"output"``, ``"internal"``. Releases the GIL; a pending ``KeyboardInterrupt`` stops a
    sweep and is raised once the points running finish."""

def version() -> str:
    """The version of the meshsim library the module was built from."""
