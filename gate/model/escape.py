"""One escaping function per output format, for text that comes from policies, cases or replies.

Every piece of untrusted text goes through the function of the format it lands in:
- `visible`: one line, invisible and control characters shown as escapes, so
  `tempera\\u200bture` does not look like `temperature`;
- `log_text`: messages and log lines (terminal, Actions log): `visible`, and never a workflow
  command by the runner's rules (`neutral_line`);
- `markdown`: report.md, summary.md, the PR comment and the check-run summary;
- `code`: an identifier in a Markdown code span (falls back to `markdown` when it is not one);
- `xml_text`: JUnit XML attribute and element text (characters XML 1.0 cannot hold);
- `workflow_data`: the data part of a workflow command (`::warning::DATA`).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Sequence
from typing import IO

# Case ids and slice names ("Untrusted text"): safe raw in every output format.
NAME_PATTERN = r"^[A-Za-z0-9._:/-]{1,200}$"
NAME_RULE = "letters, digits and . _ : / - only, 1 to 200 characters"
_NAME = re.compile(NAME_PATTERN)

_NAMED_CONTROLS = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def styled(stream: IO[str]) -> bool:
    """Whether `stream` may carry escape sequences (colour, bold, a redrawn bar): a terminal, and
    NO_COLOR unset or empty (no-color.org). Otherwise every line is plain text, as in a log."""
    return stream.isatty() and not os.environ.get("NO_COLOR")


def is_name(text: object) -> bool:
    return isinstance(text, str) and _NAME.fullmatch(text) is not None


def _shown(ch: str) -> str:
    if ch in _NAMED_CONTROLS:
        return _NAMED_CONTROLS[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _hidden(ch: str) -> bool:
    """Control, format (zero-width, bidi overrides), surrogate, private, unassigned, separators."""
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") or (
        ch != " " and unicodedata.category(ch) == "Zs"
    )


def visible(text: object, limit: int | None = None) -> str:
    """One line with every invisible or control character written as an escape (`\\u200b`)."""
    s = str(text)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    if s.isascii() and s.isprintable():
        return s
    return "".join(_shown(ch) if _hidden(ch) else ch for ch in s)


# The GitHub Actions runner reads a workflow command from a line that, after its leading whitespace
# is trimmed, starts with `::` (`::error::x`), or that holds `##[` anywhere (`##[error]x`, the old
# syntax). One character of each is written as an escape, which also keeps JSON valid.
_OLD_COMMAND = "##["
_OLD_COMMAND_SHOWN = "#\\u0023["
_COLON_SHOWN = "\\u003a"


def neutral_line(line: str) -> str:
    """`line` as the runner will never read a workflow command from (one line, no CR or LF)."""
    if _OLD_COMMAND in line:
        line = line.replace(_OLD_COMMAND, _OLD_COMMAND_SHOWN)
    start = len(line) - len(line.lstrip())
    if line.startswith("::", start):
        line = line[:start] + _COLON_SHOWN + line[start + 1 :]
    return line


def log_text(text: object, limit: int | None = None) -> str:
    """A fragment of a log line: `visible`, and no workflow command wherever it lands on the line.

    Untrusted text may be printed indented or after an empty fragment: `::` is neutralised at
    the fragment's start (after whitespace, as the runner trims it) and `##[` everywhere. Every
    line the CLI or the Action prints passes `gate.model.process.guarded_output` too."""
    return neutral_line(visible(text, limit))


# ---- Markdown (report, summary, comment, check-run summary) ----------------------------------
# Text is folded onto one line and never starts a line, so only inline syntax needs escaping.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_LINKISH = re.compile(r"(?i)(https?|ftp|www)(:|\.)")


def markdown(text: object, limit: int | None = None) -> str:
    """Neutralise Markdown, HTML (`<!--` included) and mentions; fold onto one visible line."""
    s = " ".join(visible(" ".join(str(text).split())).split())
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    # "@team" would notify people; "https://" would autolink. Break both with a zero-width joiner.
    s = s.replace("@", "@\u200d")
    return _LINKISH.sub(lambda m: m.group(1) + "\u200d" + m.group(2), s)


_CODE_SAFE = re.compile(r"^[A-Za-z0-9._:/ +=,()#-]{0,300}$")


def code(text: object) -> str:
    """An identifier in a code span; anything that could leave the span is escaped as text."""
    s = str(text)
    return f"`{s}`" if _CODE_SAFE.fullmatch(s) and s.strip() == s and s else markdown(s)


MAX_IDS_INLINE = 25


def id_list(ids: Sequence[object], limit: int = MAX_IDS_INLINE) -> str:
    """Identifiers as code spans, comma-separated: the first `limit`, then how many more."""
    shown = ", ".join(code(i) for i in ids[:limit])
    more = len(ids) - limit
    return shown + (f" and {more} more" if more > 0 else "")


# ---- XML (junit.xml) -----------------------------------------------------------------------------
# The complement of XML 1.0's Char production, written as the few ranges it excludes: the same set
# as [^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff], ~0.1 ms to compile instead of ~8
# (every `gate` command imports this module).
_XML_ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: object) -> str:
    """Text XML 1.0 can hold (ElementTree escapes `<&"`; it does not refuse control characters)."""
    return _XML_ILLEGAL.sub(lambda m: _shown(m.group(0)), str(text))


# ---- workflow commands ---------------------------------------------------------------------------
def workflow_data(text: object) -> str:
    """The data part of a workflow command, as the runner unescapes it (`%`, CR, LF)."""
    return visible(str(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))
