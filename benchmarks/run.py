"""Run every benchmark (``benchmarks/bench_*.py``, or those named) and collect their figures.

Each benchmark is a script run in its own process; it ends by printing one
JSON object per figure on its own line:
``{"bench": NAME, "value": X, "unit": U, "baseline": B, "ratio": R}``.
This runner passes their output through and ends with a table of the figures.

    python benchmarks/run.py [setqueue loop ...]
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in argv]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent), "SPARK_LOCAL_IP": "127.0.0.1"}
    figures: list[dict[str, object]] = []
    failed = []
    for script in scripts:
        print(f"== {script.name}", flush=True)
        proc = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, check=False
        )
        sys.stderr.write(proc.stderr[-4000:] if proc.returncode else "")
        for line in proc.stdout.splitlines():
            print(line, flush=True)
            if line.startswith("{"):
                with contextlib.suppress(json.JSONDecodeError):
                    figures.append(json.loads(line))
        if proc.returncode:
            failed.append(script.name)
    print("\n== figures")
    for fig in figures:
        ratio = f"  ratio {fig['ratio']:.2f}" if fig.get("ratio") is not None else ""
        base = f"  baseline {fig['baseline']:,.0f}" if fig.get("baseline") is not None else ""
        print(f"{fig['bench']:<45} {fig['value']:>14,.1f} {fig['unit']}{base}{ratio}")
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
