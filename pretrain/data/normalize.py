"""Text normalisation and document cutting.

Every input goes through `normalize_text` so that the same words give the same tokens whatever
the file's encoding or line endings were: real corpora mix UTF-8, Latin-1 (NLTK's
shakespeare-caesar.txt) and CRLF files (its moby_dick.txt).
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_LINE_BREAK = re.compile(r"\n")


def decode_bytes(data: bytes) -> str:
    """UTF-8 (BOM stripped) when valid, else Latin-1, which decodes any byte string losslessly."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def normalize_text(text: str) -> str:
    """CRLF/CR -> LF, Unicode NFC, no byte-order mark."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return text


def _cut(text: str, target: int, breaks: re.Pattern[str]) -> Iterator[str]:
    """Greedy cut at `breaks`: emit a piece as soon as it reaches `target` characters."""
    start = 0
    for match in breaks.finditer(text):
        if match.start() - start >= target:
            yield text[start : match.start()]
            start = match.end()
    yield text[start:]


def split_documents(text: str, doc_chars: int) -> Iterator[str]:
    """Cut a plain-text file into documents of about `doc_chars` at paragraph (blank-line) breaks.

    A paragraph run longer than twice the target (text without blank lines) is cut at line
    breaks instead, so one huge line-structured file still yields several documents.
    """
    for piece in _cut(text, doc_chars, _PARAGRAPH_BREAK):
        parts = _cut(piece, doc_chars, _LINE_BREAK) if len(piece) > 2 * doc_chars else (piece,)
        for part in parts:
            part = part.strip()
            if part:
                yield part
