"""CloudWatch Logs filter patterns for unstructured log events: the term syntax.

``ERROR`` and ``"model load"`` must all appear; ``?ERROR ?WARN`` needs any one of the
``?`` terms; ``-DEBUG`` must not appear. Matching is case-sensitive, as on AWS. JSON
(``{ $.level = "x" }``), space-delimited (``[ip, user, ...]``) and regular-expression
(``%...%``) patterns are refused with InvalidParameterException rather than silently
matched as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from core.logs.errors import InvalidParameterException

# A double-quoted phrase (backslash escapes inside) or a run of non-blank characters.
_TOKEN = re.compile(r'([?-]?)(?:"((?:[^"\\]|\\.)*)"|(\S+))')
_UNSUPPORTED_OPENERS = ("{", "[", "%")


@dataclass(frozen=True)
class FilterPattern:
    all_of: tuple[str, ...] = ()
    any_of: tuple[str, ...] = ()
    none_of: tuple[str, ...] = field(default=())

    @property
    def matches_everything(self) -> bool:
        return not (self.all_of or self.any_of or self.none_of)

    def matches(self, message: str) -> bool:
        if any(term not in message for term in self.all_of):
            return False
        if self.any_of and not any(term in message for term in self.any_of):
            return False
        return not any(term in message for term in self.none_of)


def parse_filter_pattern(pattern: str | None) -> FilterPattern:
    text = (pattern or "").strip()
    if not text:
        return FilterPattern()
    if text.startswith(_UNSUPPORTED_OPENERS):
        raise InvalidParameterException(
            f"Invalid filter pattern '{text}': this server supports term patterns only "
            '(terms, "quoted phrases", ?any-of terms, -excluded terms); JSON, space-delimited '
            "and regular-expression patterns are not supported."
        )
    all_of: list[str] = []
    any_of: list[str] = []
    none_of: list[str] = []
    position = 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        match = _TOKEN.match(text, position)
        if match is None:  # an unterminated quote
            raise InvalidParameterException(f"Invalid filter pattern '{text}': unbalanced quotes.")
        prefix, quoted, bare = match.groups()
        term = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        if term:
            {"?": any_of, "-": none_of}.get(prefix, all_of).append(term)
        position = match.end()
    return FilterPattern(tuple(all_of), tuple(any_of), tuple(none_of))
