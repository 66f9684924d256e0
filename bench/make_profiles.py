"""Rebuild the shipped machine profiles from the recorded inputs.

    python bench/make_profiles.py

Reads tests/fixtures/recorded/ (copies of ../shared/recorded/) and writes
devicebench/profiles/data/{h200,m1-published}.json. The CPU VM profile is recorded live:
`devicebench profile record -o devicebench/profiles/data/cpu-vm.json`.
"""

from __future__ import annotations

from pathlib import Path

from devicebench.profiles.profile import PROFILES_DIR
from devicebench.profiles.shipped import build_all

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    for name, profile in build_all(ROOT / "tests" / "fixtures" / "recorded").items():
        path = PROFILES_DIR / f"{name}.json"
        profile.save(path)
        n = sum(len(r) for r in profile.workloads.values())
        print(f"{path.relative_to(ROOT)}: {n} records, {len(profile.figures)} devices")


if __name__ == "__main__":
    main()
