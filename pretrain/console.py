"""Console progress: one live line on a terminal, plain lines in log files (Slurm, sweeps)."""
from __future__ import annotations

import sys


def _fmt_rate(x: float) -> str:
    return f"{x / 1e6:.2f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


def _fmt_eta(s: float) -> str:
    s = int(max(0, s))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Progress:
    def __init__(self, enabled: bool = True, stream=None, messages: bool = True):
        self.enabled = enabled  # progress lines
        self.messages = messages  # one-off messages (resume, warnings, done) are shown even without progress
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self._live = False

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
            self.stream.write("\r\x1b[2K" + text)
            self._live = True
        else:
            self.stream.write(("\r\x1b[2K" if self._live else "") + text + "\n")
            self._live = False
        self.stream.flush()

    def message(self, text: str) -> None:
        if not self.messages:
            return
        if self._live:
            self.stream.write("\n")
            self._live = False
        self.stream.write(text + "\n")
        self.stream.flush()
