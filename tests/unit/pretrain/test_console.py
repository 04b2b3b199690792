"""The console progress line (pretrain/callbacks/console.py, through rich): plain lines with exactly the
record's text when the output is not a terminal (log files, pipes), a live line on a terminal."""

from __future__ import annotations

import io

from pretrain.callbacks.console import Progress

REC = {"step": 3, "loss": 6.25, "lr": 3e-3, "tokens_per_s": 2610.4, "mfu": 0.127, "eta_s": 65}
MOE = "moe imb 1.21/1.48 drop 0.8% ent 1.93 aux 1.012 z 0.41 |b| 0.0123"  # makes the line longer than 80 columns


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_in_a_log_file_are_the_records_text_unwrapped():
    buf = io.StringIO()
    p = Progress(stream=buf)
    p.message("resumed from checkpoint step_2 (2/8 steps done)")
    p.update(REC, 8, MOE)
    p.update(REC | {"step": 4, "val_loss": 6.1, "val_bpb": 4.4}, 8)
    p.close()
    lines = buf.getvalue().splitlines()
    assert "\x1b" not in buf.getvalue() and "\r" not in buf.getvalue()
    assert lines == [
        "resumed from checkpoint step_2 (2/8 steps done)",
        f"step 3/8 | loss 6.2500 | lr 3.00e-03 | 2.6k tok/s | MFU 12.7% | ETA 0:01:05 | {MOE}",
        "step 4/8 | loss 6.2500 | lr 3.00e-03 | 2.6k tok/s | MFU 12.7% | ETA 0:01:05 | val 6.1000 (4.400 bpb)",
    ]


def test_live_line_on_a_terminal_and_lasting_lines_for_evaluations():
    buf = Terminal()
    p = Progress(stream=buf)
    p.update(REC, 8)
    p.update(REC | {"step": 5}, 8)
    p.message("warning: something")
    p.update(REC | {"step": 6, "val_loss": 6.1, "val_bpb": 4.4}, 8)
    p.update(REC | {"step": 7}, 8)
    p.close()
    out = buf.getvalue()
    assert "\x1b[" in out  # redrawn in place
    assert "step 3/8" in out and "warning: something" in out
    assert (
        "step 6/8 | loss 6.2500 | lr 3.00e-03 | 2.6k tok/s | MFU 12.7% | ETA 0:01:05 | val 6.1000 (4.400 bpb)\n" in out
    )
    assert out.rstrip("\n").endswith("step 7/8 | loss 6.2500 | lr 3.00e-03 | 2.6k tok/s | MFU 12.7% | ETA 0:01:05")


def test_disabled_progress_still_shows_messages():
    buf = io.StringIO()
    p = Progress(enabled=False, stream=buf)
    p.update(REC, 8)
    p.message("done: 8 steps")
    p.close()
    assert buf.getvalue() == "done: 8 steps\n"
