"""Text normalisation and document cutting.

Every input goes through `normalize_text` so that the same words give the same tokens whatever
the file's encoding or line endings were: real corpora mix UTF-8, Latin-1 (NLTK's
shakespeare-caesar.txt) and CRLF files (its moby_dick.txt).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Iterator

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


def normalize_line(line: str) -> str:
    """`normalize_text` for one line of a streamed file (its byte-order mark is dropped by the reader).

    Equal, line by line, to normalising the whole text: CR/CRLF are rewritten within the line and
    NFC never composes across a newline."""
    if "\r" in line:
        line = line.replace("\r\n", "\n").replace("\r", "\n")
    if not line.isascii():
        line = unicodedata.normalize("NFC", line)
    return line


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


# ---------------------------------------------------------------------------------------------
# Streaming: the same cuts as `split_documents`, fed a line at a time in bounded memory.

FEED_CHARS = 1 << 16  # text gathered between two scans for breaks


class _StreamCutter:
    """`split_documents` over text that arrives in pieces, emitting each document as soon as it is final.

    A paragraph break is final once a non-whitespace character follows it (its trailing `\\s*`
    cannot grow). Scans resume where the previous one stopped, and a piece that is already
    known to exceed twice the target is cut at line breaks as it streams, so memory stays
    around a few documents however long the input is.
    """

    def __init__(self, doc_chars: int):
        self.dc = doc_chars
        self.buf = ""  # text from the current piece start (or current line part, in line mode)
        self.dropped = 0  # characters of the current piece already emitted as line parts
        self.para_from = 0  # no qualifying paragraph break starts before this index of buf
        self.line_mode = False
        self.line_from = 0

    def feed(self, text: str, final: bool) -> Iterator[str]:
        self.buf += text
        while True:
            buf, dc = self.buf, self.dc
            scan, resume, found = self.para_from, None, None
            for m in _PARAGRAPH_BREAK.finditer(buf, scan):
                if not final and m.end() == len(buf):
                    resume = m.start()  # may still grow with the next text
                    break
                if m.start() + self.dropped >= dc:
                    found = m
                    break
                scan = m.end()
            if found is not None:
                yield from self._end_piece(buf[: found.start()])
                self.buf = buf[found.end() :]
                self.dropped, self.para_from, self.line_mode, self.line_from = 0, 0, False, 0
                continue
            if final:
                yield from self._end_piece(buf)
                self.buf, self.dropped, self.para_from, self.line_mode, self.line_from = "", 0, 0, False, 0
                return
            self.para_from = resume if resume is not None else max(scan, len(buf.rstrip()))
            if self.line_mode or self.dropped + self.para_from > 2 * dc:
                self.line_mode = True
                self._line_parts_before(self.para_from)
                yield from self._ready
            return

    def _line_parts_before(self, limit: int) -> None:
        """Emit (into self._ready) the line parts of the current long piece that end before `limit`."""
        self._ready: list[str] = []
        while True:
            cut = None
            for m in _LINE_BREAK.finditer(self.buf, self.line_from):
                if m.start() >= limit:
                    break
                if m.start() >= self.dc:
                    cut = m
                    break
                self.line_from = m.end()
            if cut is None:
                return
            self._ready.append(self.buf[: cut.start()])
            self.buf = self.buf[cut.end() :]
            self.dropped += cut.end()
            limit -= cut.end()
            self.para_from -= cut.end()
            self.line_from = 0

    def _end_piece(self, rest: str) -> Iterator[str]:
        """The current piece ends after `rest` (its not yet emitted text)."""
        if self.line_mode or self.dropped + len(rest) > 2 * self.dc:
            yield from _cut(rest, self.dc, _LINE_BREAK)
        else:
            yield rest


def _clean(parts: Iterable[str]) -> Iterator[str]:
    for part in parts:
        part = part.strip()
        if part:
            yield part


def cut_lines(lines: Iterable[str], doc_chars: int | None, delimiter: str | None) -> Iterator[str]:
    """Documents of a plain-text stream of normalised lines (newlines kept).

    A line equal to `delimiter` (surrounding whitespace ignored) ends a document and is dropped.
    Between delimiters the text is cut like `split_documents(text, doc_chars)`; with
    `doc_chars=None` it stays one document. Documents are stripped; empty ones are skipped.
    """
    if doc_chars is None:
        pending: list[str] = []
        for line in lines:
            if delimiter is not None and line.strip() == delimiter:
                yield from _clean(["".join(pending)])
                pending = []
            else:
                pending.append(line)
        yield from _clean(["".join(pending)])
        return
    cutter = _StreamCutter(doc_chars)
    pending, size = [], 0
    for line in lines:
        if delimiter is not None and line.strip() == delimiter:
            yield from _clean(cutter.feed("".join(pending), final=True))
            pending, size = [], 0
            continue
        pending.append(line)
        size += len(line)
        if size >= FEED_CHARS:
            yield from _clean(cutter.feed("".join(pending), final=False))
            pending, size = [], 0
    yield from _clean(cutter.feed("".join(pending), final=True))
