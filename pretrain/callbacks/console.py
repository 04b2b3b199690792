"""The console: progress lines through `rich` (`Progress`) and the callback that prints one per metrics
record, with the MoE router summary when there is one (`ConsoleLogger`).

On a terminal the latest record is a live line, redrawn in place; records with a held-out
evaluation and one-off messages (resume, warnings, done) are printed as lasting lines above it.
Elsewhere every record is one plain line: no colours, no control codes, no wrapping.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.live import Live
from rich.text import Text

from models.moe.metrics import console_summary
from pretrain.callbacks.base import Callback


def _fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


def _fmt_eta(s: float) -> str:
    s = int(max(0, s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    def __init__(self, enabled: bool = True, stream=None, messages: bool = True):
        self.enabled = enabled  # progress lines
        self.messages = messages  # one-off messages (resume, warnings, done) are shown even without progress
        stream = stream or sys.stdout
        # the stream decides, not the environment (FORCE_COLOR in a CI log must not turn on live redraws)
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.console = Console(
            file=stream, force_terminal=self.tty, highlight=False, markup=False, emoji=False, soft_wrap=True
        )
        self._live: Live | None = None
        self._last = ""

    def line(self, m: dict, total_steps: int, extra: str = "") -> str:
        parts = [
            f"step {m['step']}/{total_steps}",
            f"loss {m['loss']:.4f}",
            f"lr {m['lr']:.2e}",
            f"{_fmt_rate(m['tokens_per_s'])} tok/s",
            f"MFU {100 * m['mfu']:.1f}%" if m.get("mfu") == m.get("mfu") and m.get("mfu") is not None else "MFU n/a",
            f"ETA {_fmt_eta(m.get('eta_s', 0))}",
        ]
        if "val_loss" in m:
            parts.append(f"val {m['val_loss']:.4f} ({m['val_bpb']:.3f} bpb)")
        if extra:
            parts.append(extra)
        return " | ".join(parts)

    def update(self, m: dict, total_steps: int, extra: str = "", final: bool = False) -> None:
        if not self.enabled:
            return
        text = self.line(m, total_steps, extra)
        if self.tty and not final and "val_loss" not in m:
            if self._live is None:  # transient: a lasting line replaces it, never duplicates it
                self._live = Live(Text(text), console=self.console, auto_refresh=False, transient=True)
                self._live.start()
            self._live.update(Text(text), refresh=True)
            self._last = text
        else:
            self._end_live()
            self.console.print(text)

    def message(self, text: str) -> None:
        if self.messages:
            self.console.print(text)  # above the live line, if there is one

    def _end_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def close(self) -> None:
        """End the live line, leaving its last text as a lasting line."""
        if self._live is not None:
            self._end_live()
            self.console.print(self._last)


class ConsoleLogger(Callback):
    priority = 10

    def __init__(self, progress):
        self.progress = progress

    def log_metrics(self, step: int, rec: dict) -> None:
        if self.info.is_main:
            self.progress.update(rec, self.info.total_steps, console_summary(rec))

    def close(self) -> None:
        self.progress.close()
