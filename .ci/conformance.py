"""neon's own test suite against neonlike, as a ratchet: run ../shared/conformance/neon/run.sh
and fail if a neon test file listed in tests/conformance/neon_baseline.txt (files whose every
test passed, skips aside) no longer does. The baseline only grows: a newly clean file is
reported, to be added.

    python .ci/conformance.py              # run the baseline files and compare (CI)
    python .ci/conformance.py --update     # run every file; add the newly clean ones

Where the runner is missing (a checkout without ../shared) it says so and succeeds.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT.parent / "shared" / "conformance" / "neon" / "run.sh"
BASELINE = ROOT / "tests" / "conformance" / "neon_baseline.txt"
ROW = re.compile(r"^(test_\w+\.py)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*(\(.*\))?\s*$")


def run(files: list) -> dict:
    """{file: (passed, failed, error, skipped, note)} from the runner's per-file table, for
    `files` (all of neon's test files where empty)."""
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, NL_WIDE_OUT=out)
        proc = subprocess.run(["bash", str(RUNNER), *files], cwd=ROOT, env=env, text=True,
                              capture_output=True)
    print(proc.stdout[-6000:])
    rows = {}
    for line in proc.stdout.splitlines():
        m = ROW.match(line)
        if m:
            rows[m[1]] = tuple(int(m[i]) for i in range(2, 6)) + (m[7] or "",)
    if not rows:
        sys.exit(f"conformance: no per-file table in the runner's output (exit {proc.returncode})"
                 f"\n{proc.stderr[-3000:]}")
    return rows


def clean(row: tuple) -> bool:
    passed, failed, error, _, note = row
    return passed > 0 and failed == 0 and error == 0 and not note


def main() -> int:
    if not RUNNER.is_file():
        print(f"conformance: skipped, {RUNNER} is not in this checkout")
        return 0
    baseline = [ln.strip() for ln in BASELINE.read_text().splitlines()
                if ln.strip() and not ln.startswith("#")]
    update = "--update" in sys.argv
    rows = run([] if update else baseline)
    broken = [f for f in baseline if not clean(rows.get(f, (0, 0, 0, 0, "missing")))]
    new = sorted(f for f, r in rows.items() if clean(r) and f not in baseline)
    if update and new:
        with BASELINE.open("a") as fh:
            fh.write("".join(f + "\n" for f in new))
        print(f"conformance: added {new} to {BASELINE.name}")
    elif new:
        print(f"conformance: newly clean, add them to {BASELINE.name}: {new}")
    if broken:
        for f in broken:
            print(f"conformance: REGRESSION {f}: {rows.get(f, 'not in the table')}")
        return 1
    print(f"conformance: the {len(baseline)} baseline files of neon's suite pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
