"""Yes/no values as people write them: the one reading every boolean setting shares.

`bool("no")` is True, so no setting may be read with `bool`. A yes/no value is a real boolean,
1 or 0, or one of true/false, yes/no, on/off in any case; anything else is refused by name.
"""

from __future__ import annotations

from typing import Any

from rlctl.domain.errors import ConfigError

TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
FALSE_WORDS = frozenset({"false", "no", "off", "0"})


def shown(value: Any) -> str:
    """A value as a message quotes it: null, true/false, or its repr."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def parse_bool(value: Any) -> bool:
    """True or False from a real boolean, 1/0, or true/false, yes/no, on/off in any case."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    raise ConfigError(f"{shown(value)} is not a yes/no value; write true or false")
