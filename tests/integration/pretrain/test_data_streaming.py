"""Streaming pieces of `prepare`: compressed readers, the streamed document cutter, chunked and
parallel encoding, the token stream over shards (no tokenizer training needed except where noted)."""

from __future__ import annotations

from pathlib import Path


def test_workers_start_from_an_unguarded_script(tmp_path):
    """A user's script without `if __name__ == "__main__"` must not be re-run by the workers
    (multiprocessing's spawn would, and deadlock on prepare's lock)."""
    import subprocess
    import sys

    script = tmp_path / "plain_script.py"
    script.write_text(
        "import numpy as np\n"
        "from pretrain.data import encode as enc\n"
        "from pretrain.data.tokenizer import load_gpt2\n"
        "enc.POOL_MIN_CHARS = 1000\n"
        "tok = load_gpt2()\n"
        "docs = [(i, f'Document {i}.\\nIt has lines\\nand more.\\n' * 100) for i in range(20)]\n"
        "e = enc.Encoder(tok, np.uint16, workers=2)\n"
        "print('RUN', len(list(e.encode(docs))), e.pool_workers)\n"
    )
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("RUN") == 1 and res.stdout.split() == ["RUN", "20", "2"]
