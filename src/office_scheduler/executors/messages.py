"""Failure messages of agent CLIs, cleaned before they are stored or shown.

The full stderr of a session is kept in its run log (``output.stderr`` lines); the message
stored on the run, shown in the inbox and used for classification is cleaned:

* ANSI escape sequences (colours, cursor moves; Gemini prints its errors in red) are
  removed;
* the CLIs' advice about the scheduler's own temporary folders is dropped: Gemini's
  ``Security Warning: Skipping system defaults file '/tmp/...': ... run: sudo chmod ...``
  and Codex's ``WARNING: proceeding, even though we could not create PATH aliases:
  Refusing to create helper binaries under temporary dir "/tmp"``; the person reading the
  inbox cannot and must not act on them;
* cosmetic start-up notices (Gemini's ``Warning: 256-color support not detected``,
  ``Ripgrep is not available``) and stack frames are dropped;
* the first meaningful error line comes first, followed by the remaining lines, so a
  one-line view shows the cause.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from office_scheduler.error_text import strip_ansi

#: CSI and OSC escape sequences and lone ESC-prefixed controls.
#: Advice about temporary folders (ownership, permissions, helper binaries).
_TEMP_ADVICE: Final = re.compile(
    r"Security Warning: Skipping (?:system|system defaults) (?:settings )?file"
    r"|sudo ch(?:mod|own)\b"
    r"|Refusing to create helper binaries under temporary dir"
    r"|could not create PATH aliases",
    re.IGNORECASE,
)
#: Start-up notices that never explain a failure.
_COSMETIC: Final = re.compile(
    r"^(?:Warning: \d+-color support not detected"
    r"|Ripgrep is not available"
    r"|MCP issues detected\. Run /mcp list for status)",
)
_STACK_FRAME: Final = re.compile(r"^\s+at \S")
#: Lines that name an error (tried first, so the cause leads the message).
_ERROR_LINE: Final = re.compile(
    r"error|not logged in|please (?:set|run)|not running in a trusted|invalid|denied|failed"
    r"|unauthori[sz]ed|limit|quota|exhausted|unexpected argument|unknown option",
    re.IGNORECASE,
)


def _kept(lines: Iterable[str], temp_dirs: tuple[str, ...]) -> list[str]:
    kept: list[str] = []
    for raw in lines:
        line = raw.rstrip()
        if not line.strip() or _STACK_FRAME.match(line) or _COSMETIC.match(line.strip()):
            continue
        if _TEMP_ADVICE.search(line) or any(d and d in line for d in temp_dirs):
            continue
        kept.append(line)
    return kept


def clean_message(text: str, *, temp_dirs: tuple[str, ...] = ()) -> str:
    """A failure text fit to store and show (see the module docstring).

    Args:
        text: the parsed error or the stderr tail of a session.
        temp_dirs: the scheduler's own temporary folders of the session (its run dir);
            lines naming them are the CLI talking about our plumbing and are dropped.

    Returns:
        The cleaned text, the first meaningful error line first; the ANSI-stripped input
        when every line would be dropped (a message is never emptied by cleaning).
    """
    plain = strip_ansi(text).replace("\r\n", "\n")
    kept = _kept(plain.split("\n"), temp_dirs)
    if not kept:
        return plain.strip()
    first = next((i for i, line in enumerate(kept) if _ERROR_LINE.search(line)), 0)
    ordered = [kept[first], *kept[:first], *kept[first + 1 :]]
    return "\n".join(ordered).strip()
