"""Syntax highlighting of sources (Pygments): the output escapes the source, so a submission's
text can never become markup on the page."""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

#: Submission language -> Pygments lexer name (PTX has its own lexer since Pygments 2.16).
LEXERS = {"python": "python", "cuda": "cuda", "ptx": "ptx", "toml": "toml"}


def highlighted(source: str, language: str) -> SafeString:
    """HTML of the source with line numbers; plain escaped text for an unknown language."""
    try:
        lexer = get_lexer_by_name(LEXERS.get(language, language))
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    formatter = HtmlFormatter(cssclass="highlight", linenos="table", wrapcode=True)
    return mark_safe(highlight(source, lexer, formatter))
