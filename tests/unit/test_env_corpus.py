"""Doctor on real broken environments (issue 24), replayed from raw probe inputs.

Two corpora of public reports (2023-2026), each case a raw probe input replayed through the
probe's own interpretation (:func:`devicebench.env.interpret.snapshot_from_raw`) and a judge
written with the case before any rule for it:

* ``cases.json`` (49): split by ``sha256(url)`` (``split.json``); rules were written against
  its ``dev`` half, then its ``held-out`` half was looked at and rules were added for its
  misses, so both halves are development cases now.
* ``new_cases.json`` (27), collected afterwards: ``new_split.json`` (a seeded shuffle,
  committed with the cases before any rule) splits it into ``new_dev``, which rules were
  written against, and ``new_heldout``, scored once (7/14); its misses were then studied
  (round 2), so it is a development set now.
* ``round2_cases.json`` (26), collected after that: ``round2_split.json`` (seeded, committed
  before any rule) splits it into ``round2_dev``, which round 2's rules were written
  against, and ``round2_heldout``, scored once (11/13), then studied (round 3).
* ``round3_cases.json`` (24), collected after that for diversity of failure kind:
  ``round3_split.json`` (seeded, committed before any rule) splits it into ``round3_dev``,
  which round 3's rules were written against, and ``round3_heldout``, scored once (6/12),
  then studied (round 4).
* ``round4_cases.json`` (30), collected after that: ``round4_split.json`` (seeded, committed
  before any check ran on it) splits it into ``round4_dev``, which round 4's rules were
  written against, and ``round4_heldout``, scored once (10/15), then studied (round 5).
* ``round5_cases.json`` (28; a 29th, found in ``new_cases.json`` after the split, was
  dropped), collected after that: ``round5_split.json`` (seeded, committed before any
  check ran on it) splits it into ``round5_dev``, which round 5's rules were
  written against, and ``round5_heldout``, scored once (10/15), then studied (round 6).
* ``round6_cases.json`` (25), collected after that: ``round6_split.json`` (seed 2030,
  committed before any check ran on it) splits it into ``round6_dev``, which round 6's
  rules were written against, and ``round6_heldout``, scored once (9/13), then studied.
* ``round7_cases.json`` (30): ``round7_split.json`` (seed 2031, committed before any check
  ran on it) into ``round7_dev`` and ``round7_heldout``, scored once (8/15), then seen.
* ``round8_cases.json`` (28): ``round8_split.json`` (seed 2032, committed before any check
  ran on it) into ``round8_dev``, which round 9's rules were written against, and
  ``round8_heldout``, scored once after those rules were frozen (commit 13c046d).
* ``round9_cases.json`` (28): ``round9_split.json`` (seed 2033, committed before any check
  ran on it, commit df0b850) into ``round9_dev``, which round 10's rules were written
  against, and ``round9_heldout``, scored once after those rules were frozen (b81665c).
* ``round10_cases.json`` (30): ``round10_split.json`` (seed 2034, committed before any check
  ran on it, commit c9f6266) into ``round10_dev``, which round 11's rules were written
  against, and ``round10_heldout``, scored once after those rules were frozen (bcd285b).
* ``round11_cases.json`` (29): ``round11_split.json`` (seed 2035, committed before any check
  ran on it, commit e08529f) into ``round11_dev``, which round 12's rules were written
  against, and ``round11_heldout``, scored once after those rules were frozen (843fcc2),
  then seen (round 13's step 0 studied its misses).
* ``round12_cases.json`` (24): ``round12_split.json`` (seed 2036, committed before any check
  ran on it) into ``round12_dev``, which round 13's rules were written against, and
  ``round12_heldout``, scored once after those rules were frozen (4d12b7c): 10/12, then
  seen (round 14's step 0 studied its misses).
* ``round13_cases.json`` (24): ``round13_split.json`` (seed 2037, committed with the cases
  before any check ran on them) into ``round13_dev``, which round 14's rules are written
  against, and ``round13_heldout``, scored once after those rules were frozen (c54a050): 10/12,
  then seen (round 15's step 0 studied its misses).
* ``round14_cases.json`` (24): ``round14_split.json`` (seed 2038, committed with the cases
  before any check ran on them) into ``round14_dev``, which round 15's rules are written
  against, and ``round14_heldout``, scored once after those rules were frozen (348e8d3): 11/12,
  then seen (round 16's step 0 studied its miss).
* ``round15_cases.json`` (24): ``round15_split.json`` (seed 2039, committed with the cases
  before any check ran on them) into ``round15_dev``, which round 16's rules are written
  against, and ``round15_heldout``, scored once after those rules were frozen (a107ece): 8/12,
  then seen (round 17's step 0 studied its misses).
* ``round16_cases.json`` (12; 24 were asked): ``round16_split.json`` (seed 2040, committed with
  the cases before any check ran on them) into ``round16_dev``, which round 17's rules are
  written against, and ``round16_heldout``, scored once after those rules were frozen (1/6),
  then seen (round 18's step 0 studied its misses).
* ``round17_cases.json`` (16; 24 were asked): ``round17_split.json`` (seed 2041, committed with
  the cases before any check ran on them) into ``round17_dev``, which round 18's rules are
  written against, and ``round17_heldout``, scored once after those rules were frozen (5/8),
  then seen (round 19's step 0 studied its misses).
* ``round18_cases.json`` (46, the issue's large round): ``round18_split.json`` (seed 2042,
  committed with the cases before any check ran on them) into ``round18_dev`` (23), which
  round 19's rules are written against, and ``round18_heldout`` (23), scored once after those
  rules were frozen (08d1658): 10/23, then seen (round 20's step 0 studied its misses).
* ``round19_cases.json`` (32): ``round19_split.json`` (seed 2043, committed with the cases
  before any check ran on them, 69d9fd6) into ``round19_dev`` (16), which round 20's rules are
  written against, and ``round19_heldout`` (16), scored once after those rules were frozen
  (1bc6b1c): 12/16, then seen (round 21's step 0 studied its misses).
* ``round20_cases.json`` (34): ``round20_split.json`` (seed 2044, committed with the cases
  before any check ran on them, c57b2a5) into ``round20_dev`` (17), which round 21's rules are
  written against, and ``round20_heldout`` (17), scored once after those rules were frozen
  (18becd0): 6/17, then seen (round 22's step 0 studied its misses).
* ``round21_cases.json`` (33): ``round21_split.json`` (seed 2045, committed with the cases
  before any check ran on them, 2c4086e) into ``round21_dev`` (16), which round 22's rules are
  written against, and ``round21_heldout`` (17), scored once after those rules were frozen
  (5e6dfaa): 5/17, then seen (round 23's step 0 studied its misses).
* ``round22_cases.json`` (40, the issue's asked size): ``round22_split.json`` (seed 2046,
  committed with the cases before any check ran on them, e0a4df3) into ``round22_dev`` (20),
  which round 23's rules are written against, and ``round22_heldout`` (20), scored once after
  those rules were frozen (cd1a6f3): 7/20, then seen (round 24's step 0 studied its misses).
* ``round23_cases.json`` (40, the issue's asked size): ``round23_split.json`` (seed 2047,
  committed with the cases before any check ran on them, 1a84170) into ``round23_dev`` (20),
  which round 24's rules are written against, and ``round23_heldout`` (20), scored once after
  those rules were frozen (dcdcc00): 5/20, then seen (round 25's step 0 studied its misses).
* ``round24_cases.json`` (17; two collectors, O: forum threads outside GitHub, P: accelerators
  other than NVIDIA CUDA): ``round24_split.json`` (seed 2048, committed with the cases before
  any check ran on them, 8bde732) into ``round24_dev`` (8), which round 25's rules are written
  against, and ``round24_heldout`` (9), scored once after those rules were frozen (c8d160d):
  1/9, then seen (round 26's step 0 studied its misses).
* ``round25_cases.json`` (40, the issue's asked size; two collectors, Q: how the frameworks were
  installed, R: Python-level dependencies around them): ``round25_split.json`` (seed 2049,
  committed with the cases before any check ran on them, c9820b3) into ``round25_dev`` (20),
  which round 26's rules are written against, and ``round25_heldout`` (20), scored once after
  those rules were frozen (70e8cda): 8/20, then seen (round 27's step 0 studied its misses).

Run with ``-s`` to see the figures.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from devicebench.env.checks import run_checks
from devicebench.env.finding import Finding
from devicebench.env.interpret import snapshot_from_raw
from devicebench.env.snapshot import load_snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_DIR = FIXTURES / "env_corpus"


def _load(name: str) -> dict:
    return json.loads((_DIR / f"{name}.json").read_text(encoding="utf-8"))


CORPUS, SPLIT = _load("cases")["cases"], _load("split")
NEW, NEW_SPLIT = _load("new_cases")["cases"], _load("new_split")
ROUND2, ROUND2_SPLIT = _load("round2_cases")["cases"], _load("round2_split")
ROUND3, ROUND3_SPLIT = _load("round3_cases")["cases"], _load("round3_split")
ROUND4, ROUND4_SPLIT = _load("round4_cases")["cases"], _load("round4_split")
ROUND5, ROUND5_SPLIT = _load("round5_cases")["cases"], _load("round5_split")
ROUND6, ROUND6_SPLIT = _load("round6_cases")["cases"], _load("round6_split")
ROUND7, ROUND7_SPLIT = _load("round7_cases")["cases"], _load("round7_split")
ROUND8, ROUND8_SPLIT = _load("round8_cases")["cases"], _load("round8_split")
ROUND9, ROUND9_SPLIT = _load("round9_cases")["cases"], _load("round9_split")
ROUND10, ROUND10_SPLIT = _load("round10_cases")["cases"], _load("round10_split")
ROUND11, ROUND11_SPLIT = _load("round11_cases")["cases"], _load("round11_split")
ROUND12, ROUND12_SPLIT = _load("round12_cases")["cases"], _load("round12_split")
ROUND13, ROUND13_SPLIT = _load("round13_cases")["cases"], _load("round13_split")
ROUND14, ROUND14_SPLIT = _load("round14_cases")["cases"], _load("round14_split")
ROUND15, ROUND15_SPLIT = _load("round15_cases")["cases"], _load("round15_split")
ROUND16, ROUND16_SPLIT = _load("round16_cases")["cases"], _load("round16_split")
ROUND17, ROUND17_SPLIT = _load("round17_cases")["cases"], _load("round17_split")
ROUND18, ROUND18_SPLIT = _load("round18_cases")["cases"], _load("round18_split")
ROUND19, ROUND19_SPLIT = _load("round19_cases")["cases"], _load("round19_split")
ROUND20, ROUND20_SPLIT = _load("round20_cases")["cases"], _load("round20_split")
ROUND21, ROUND21_SPLIT = _load("round21_cases")["cases"], _load("round21_split")
ROUND22, ROUND22_SPLIT = _load("round22_cases")["cases"], _load("round22_split")
ROUND23, ROUND23_SPLIT = _load("round23_cases")["cases"], _load("round23_split")
ROUND24, ROUND24_SPLIT = _load("round24_cases")["cases"], _load("round24_split")
ROUND25, ROUND25_SPLIT = _load("round25_cases")["cases"], _load("round25_split")

# Figures measured here (diagnosed / cases). A change that lowers one fails; raise the dev
# ones when rules improve (never to a figure not reached). The held-out floor is the figure
# measured once, after the rules; it is not raised by rules written after seeing it.
# cases.json, both halves (all seen): first 4/24 + 5/25, then dev 23/24 and held-out 17/25
# (that figure was measured before its misses were looked at), now:
OLD_DIAGNOSED_AT_LEAST = 47  # of 49, 2026-12-01; the 2 left need the user's process
NEW_DEV_DIAGNOSED_AT_LEAST = 13  # of 13 (before this set's rules: 6/13)
# new_heldout was scored once, untouched, at 7/14 (50%) on 2026-12-01; its misses were then
# studied and general rules written for them (round 2), so it is a development set now.
NEW_HELDOUT_DIAGNOSED_AT_LEAST = 14  # of 14 after round 2's rules (seen)
# round2_cases.json (26), split by round2_split.json before any rule for it:
ROUND2_DEV_DIAGNOSED_AT_LEAST = 13  # of 13 (before its rules: 4/13)
# round2_heldout was scored once, untouched, at 11/13 (85%) on 2026-12-01; its two misses (Intel
# Macs) were then studied (round 3: platform_ceilings), so it is a development set now.
ROUND2_HELDOUT_DIAGNOSED_AT_LEAST = 13  # of 13 after round 3's rules (seen)
# round3_cases.json (24), split by round3_split.json before any rule for it:
ROUND3_DEV_DIAGNOSED_AT_LEAST = 10  # of 12 (before its rules: 5/12)
# round3_heldout was scored once, untouched, at 6/12 (50%) on 2026-12-01; its misses were then
# studied (round 4: ROCm from rocminfo, /dev/kfd, WSL 1, CUDA torch on AMD), so it is seen now.
ROUND3_HELDOUT_DIAGNOSED_AT_LEAST = 10  # of 12 after round 4's rules (seen)
# round4_cases.json (30), split by round4_split.json before any check ran on it:
ROUND4_DEV_DIAGNOSED_AT_LEAST = 14  # of 15 (before its rules: 8/15)
# round4_heldout was scored once, untouched, at 10/15 (67%) on 2026-12-01; its misses were then
# studied (round 5: ptxas wording, Python newer than old pins, macOS VMs), so it is seen now.
ROUND4_HELDOUT_DIAGNOSED_AT_LEAST = 14  # of 15 after round 5's rules (seen)
# round5_cases.json (28), split by round5_split.json before any check ran on it:
ROUND5_DEV_DIAGNOSED_AT_LEAST = 12  # of 13 (before its rules: 5/13)
# round5_heldout was scored once, untouched, at 10/15 (67%) on 2026-12-01; its misses were then
# studied (round 6: the build's CUDA named, 'no kernel image' over PTX, variants, sandboxes).
ROUND5_HELDOUT_DIAGNOSED_AT_LEAST = 14  # of 15 after round 6's rules (seen)
# round6_cases.json (25), split by round6_split.json before any check ran on it:
ROUND6_DEV_DIAGNOSED_AT_LEAST = 11  # of 12 (before its rules: 6/12)
# round6_heldout was scored once, untouched, at 9/13 (69%) on 2026-12-01; its misses were then
# studied (round 7: 'No HIP GPUs', Keras-2 add-ons beside keras 3, 0.0.0 placeholders).
ROUND6_HELDOUT_DIAGNOSED_AT_LEAST = 12  # of 13 after round 7's rules (seen)
# round7_cases.json (30), split by round7_split.json before any check ran on it:
ROUND7_DEV_DIAGNOSED_AT_LEAST = 14  # of 15 (before its rules: 10/15)
# round7_heldout: scored once, untouched, at 8/15 (53%) on 2026-12-01, then seen (round 8)
ROUND7_HELDOUT_DIAGNOSED_AT_LEAST = 12  # of 15 after round 9's rules (seen)
# round8_cases.json (28), split by round8_split.json before any check ran on it:
ROUND8_DEV_DIAGNOSED_AT_LEAST = 13  # of 14 (before its rules: 11/14)
# round8_heldout: scored once, untouched, with the rules frozen (commit 13c046d), 2026-12-02:
ROUND8_HELDOUT_DIAGNOSED_AT_LEAST = 7  # of 14 (50%); a floor, not raised by later rules
# round9_cases.json (28), split by round9_split.json before any check ran on it:
ROUND9_DEV_DIAGNOSED_AT_LEAST = 13  # of 14 (before its rules: 7/14)
# round9_heldout: scored once, untouched, with the rules frozen (commit b81665c), 2026-12-02:
ROUND9_HELDOUT_DIAGNOSED_AT_LEAST = 12  # of 14 (86%); a floor, not raised by later rules
# round10_cases.json (30), split by round10_split.json before any check ran on it:
ROUND10_DEV_DIAGNOSED_AT_LEAST = 11  # of 15 (before its rules: 9/15)
# round10_heldout: scored once, untouched, with the rules frozen (commit bcd285b), 2026-12-02:
ROUND10_HELDOUT_DIAGNOSED_AT_LEAST = 8  # of 15 (53%); a floor, not raised by later rules
# round11_cases.json (29), split by round11_split.json before any check ran on it:
ROUND11_DEV_DIAGNOSED_AT_LEAST = 12  # of 14 (before its rules: 7/14; 12 from round 19's
# JAX-plugin driver row, phlash#31)
# round11_heldout: scored once, untouched, with the rules frozen (commit 843fcc2), 2026-12-02:
ROUND11_HELDOUT_DIAGNOSED_AT_LEAST = 11  # of 15 (73%); a floor, not raised by later rules
# round12_cases.json (24), split by round12_split.json before any check ran on it:
ROUND12_DEV_DIAGNOSED_AT_LEAST = 12  # of 12 (before its rules: 10/12)
# round12_heldout: scored once, untouched, with the rules frozen (commit 4d12b7c), 2026-12-03:
ROUND12_HELDOUT_DIAGNOSED_AT_LEAST = 10  # of 12 (83%); a floor, not raised by later rules
# round13_cases.json (24), split by round13_split.json before any check ran on it:
ROUND13_DEV_DIAGNOSED_AT_LEAST = 11  # of 12 (before its rules: 7/12)
# round13_heldout: scored once, untouched, with the rules frozen (commit c54a050), 2026-12-03:
ROUND13_HELDOUT_DIAGNOSED_AT_LEAST = 10  # of 12 (83%); a floor, not raised by later rules
# round14_cases.json (24), split by round14_split.json before any check ran on it:
ROUND14_DEV_DIAGNOSED_AT_LEAST = 9  # of 12 (before its rules: 8/12)
# round14_heldout: scored once, untouched, with the rules frozen (commit 348e8d3), 2026-12-03:
ROUND14_HELDOUT_DIAGNOSED_AT_LEAST = 11  # of 12 (92%); a floor, not raised by later rules
# (round 16's step 0, JAX without its ROCm plugin, studied its miss: 12/12 now, seen)
# round15_cases.json (24), split by round15_split.json before any check ran on it:
ROUND15_DEV_DIAGNOSED_AT_LEAST = 12  # of 12 (before its rules: 10/12)
# round15_heldout: scored once, untouched, with the rules frozen (commit a107ece), 2026-12-03:
ROUND15_HELDOUT_DIAGNOSED_AT_LEAST = 8  # of 12 (67%); a floor, not raised by later rules
# (round 17's step 0, package minimum compute capability and Keras-2 add-ons, studied its misses)
# round16_cases.json (12), split by round16_split.json before any check ran on it:
ROUND16_DEV_DIAGNOSED_AT_LEAST = 6  # of 6 (before its rules: 3/6)
# round16_heldout: scored once, untouched, with the rules frozen (commit 1a659dc), 2026-12-03:
ROUND16_HELDOUT_DIAGNOSED_AT_LEAST = 1  # of 6 (17%); a floor, not raised by later rules
# (round 18's step 0, an NCCL older than torch's pin, xformers 0.0.22, a CPU package beside
# its GPU build, studied its misses: 5/6 now, seen)
# round17_cases.json (16), split by round17_split.json before any check ran on it:
ROUND17_DEV_DIAGNOSED_AT_LEAST = 8  # of 8 (before its rules: 4/8)
# round17_heldout: scored once, untouched, with the rules frozen (commit f9ec1c4), 2026-12-04:
ROUND17_HELDOUT_DIAGNOSED_AT_LEAST = 5  # of 8 (62%); a floor, not raised by later rules
# (round 19's step 0, nvidia-tensorflow's +nvYY.MM CUDA, the runtime's insufficient-driver
# message, a Linux driver's libcuda in WSL2 with no framework probed, studied its misses:
# 8/8 now, seen)
# round18_cases.json (46, the large round), split by round18_split.json before any check ran on it:
ROUND18_DEV_DIAGNOSED_AT_LEAST = 19  # of 23 (before its rules: 7/23)
# round18_heldout: scored once, untouched, with the rules frozen (commit 08d1658), 2026-12-04:
ROUND18_HELDOUT_DIAGNOSED_AT_LEAST = 10  # of 23 (43%); a floor, not raised by later rules
# (round 20's step 0, versioned CUDA symbols and sibling libraries, XLA's kernel/DSO and PTX
# compiler lines, MLX's macOS minimum, tensorflow-text 2.19.0's broken pair, studied its
# misses: 17/23 now, seen)
# round19_cases.json (32), split by round19_split.json before any check ran on it (69d9fd6):
ROUND19_DEV_DIAGNOSED_AT_LEAST = 16  # of 16 (before its rules: 5/16)
# round19_heldout: scored once, untouched, with the rules frozen (commit 1bc6b1c), 2026-12-04:
ROUND19_HELDOUT_DIAGNOSED_AT_LEAST = 12  # of 16 (75%); a floor, not raised by later rules
# (round 21's step 0, ptxas's own lines older than the GPU, onnxruntime-gpu's CUDA major per
# release, a Linux driver's libcuda in WSL2 beside Numba, studied its misses: 16/16 now, seen)
# round20_cases.json (34), split by round20_split.json before any check ran on it (c57b2a5):
ROUND20_DEV_DIAGNOSED_AT_LEAST = 12  # of 17 (before its rules: 6/17; 13 at the freeze, 12 since
# torch.compile-no-triton-on-windows became info after the scoring: pytorch#136361 no longer counts)
# round20_heldout: scored once, untouched, with the rules frozen (commit 18becd0), 2026-12-04:
ROUND20_HELDOUT_DIAGNOSED_AT_LEAST = 6  # of 17 (35%); a floor, not raised by later rules
# (round 22's step 0, Windows' path limit in an OSError's other forms, the Triton release each
# torch release pairs with, Triton's "libcuda.so cannot found", bitsandbytes' CUDA SETUP lines,
# jax 0.4 on a TPU Node, the first release without Intel-Mac wheels, studied its misses:
# 12/17 now, seen)
# round21_cases.json (33), split by round21_split.json before any check ran on it (2c4086e):
ROUND21_DEV_DIAGNOSED_AT_LEAST = 16  # of 16 (before its rules: 10/16)
# round21_heldout: scored once, untouched, with the rules frozen (commit 5e6dfaa), 2026-12-04:
ROUND21_HELDOUT_DIAGNOSED_AT_LEAST = 5  # of 17 (29%); a floor, not raised by later rules
# (round 23's step 0, library pairings (peft/trl vs transformers, diffusers vs huggingface_hub),
# vllm 0.3.x and autoawq-kernels built for one torch, jax's CUDA plugin without a GPU,
# bitsandbytes before its Windows wheels, studied its misses: 12/17 now, seen)
# round22_cases.json (40), split by round22_split.json before any check ran on it (e0a4df3):
ROUND22_DEV_DIAGNOSED_AT_LEAST = 18  # of 20 (before its rules: 2/20)
# round22_heldout: scored once, untouched, with the rules frozen (commit cd1a6f3), 2026-12-04:
ROUND22_HELDOUT_DIAGNOSED_AT_LEAST = 7  # of 20 (35%); a floor, not raised by later rules
# (round 24's step 0, keras-hub on Keras 2, orbax and graphcast against jax, jax names removed
# under jax-dependent libraries, keras-cv 0.6 without keras-core, dgl 2.1.0's torch patch bound,
# torchtext's torch per release, Open3D's ML ops on Windows, the nvcc on PATH with CUDA_HOME
# unset, studied its misses: 19/20 now, seen)
# round23_cases.json (40), split by round23_split.json before any check ran on it (1a84170):
ROUND23_DEV_DIAGNOSED_AT_LEAST = 17  # of 20 (before its rules: 7/20)
# round23_heldout: scored once, untouched, with the rules frozen (commit dcdcc00), 2026-12-04:
ROUND23_HELDOUT_DIAGNOSED_AT_LEAST = 5  # of 20 (25%); a floor, not raised by later rules
# (round 25's step 0, Slurm task layouts (local rank past the visible GPUs, JAX with one task
# per node, SLURM_JOB_ID outside a task), Isaac Sim 5.1 on a newer driver branch, conda's CUDA
# plugin beside a CPU pytorch, cudf-cu12 26.2 and nvJitLink 12.9, mace/cuequivariance,
# nemo_toolkit/NumPy 2 and RAPIDS 24.10/cuda-python pairings, studied its misses: 15/20 now,
# seen)
# round24_cases.json (17), split by round24_split.json before any check ran on it (8bde732):
ROUND24_DEV_DIAGNOSED_AT_LEAST = 7  # of 8 (before its rules: 0/8)
# round24_heldout: scored once, untouched, with the rules frozen (commit c8d160d), 2026-12-04:
ROUND24_HELDOUT_DIAGNOSED_AT_LEAST = 1  # of 9 (11%); a floor, not raised by later rules
# (round 26's step 0, a sourced oneAPI beside torch +xpu 2.6's own SYCL runtime, IPEX 2.5 under
# torch 2.6, transformers >= 4.50 with torch-npu before 2.5.1, tensorflow-rocm's hosting in the
# not-a-ROCm-build fix, studied its misses: 5/9 now, seen)
# round25_cases.json (40), split by round25_split.json before any check ran on it (c9820b3):
ROUND25_DEV_DIAGNOSED_AT_LEAST = 19  # of 20 (before its rules: 9/20)
# round25_heldout: scored once, untouched, with the rules frozen (commit 70e8cda), 2026-12-04:
ROUND25_HELDOUT_DIAGNOSED_AT_LEAST = 8  # of 20 (40%); a floor, not raised by later rules
# (round 27's step 0, typing_extensions for torch 2.5's TypeIs and for Python 3.13, datasets 2.16
# and huggingface_hub, jax 0.4.17 and scipy 1.13, keras beside keras-nightly, the pytorch
# channel's CUDA build with pytorch-cuda pinned, studied its misses: 15/20 now, seen)


def half_of(url: str) -> str:
    return "dev" if int(hashlib.sha256(url.encode()).hexdigest(), 16) % 2 == 0 else "held-out"


def diagnosed(case: dict, findings: list[Finding]) -> bool:
    """An error or warning names every cause term, and its fix holds one of the fix terms."""
    judge = case["judge"]
    for f in findings:
        if f.severity == "info":
            continue
        text = f"{f.title}\n{f.observed}\n{f.why}".lower()
        if all(t.lower() in text for t in judge["cause_terms"]) and any(
            t.lower() in f.fix.lower() for t in judge["fix_terms"]
        ):
            return True
    return False


def score(cases: list[dict]) -> tuple[int, int, list[str]]:
    missed = []
    for case in cases:
        if not diagnosed(case, run_checks(snapshot_from_raw(case["raw"]))):
            missed.append(case["url"])
    return len(cases) - len(missed), len(cases), missed


def test_split_is_the_committed_one() -> None:
    assert len(CORPUS) >= 40
    assert len({c["url"] for c in CORPUS}) == len(CORPUS)
    for half in ("dev", "held-out"):
        assert sorted(SPLIT[half]) == sorted(c["url"] for c in CORPUS if half_of(c["url"]) == half)
    for case in CORPUS:
        assert case["url"].startswith("https://") and case["raw"]["source"] == case["url"]
        assert "2023" <= case["date"][:4] <= "2026"


def test_new_split_is_the_committed_seeded_shuffle() -> None:
    import random

    urls = sorted(c["url"] for c in NEW)
    random.Random(2024).shuffle(urls)
    k = len(urls) // 2
    assert NEW_SPLIT["new_dev"] == sorted(urls[:k])
    assert NEW_SPLIT["new_heldout"] == sorted(urls[k:])
    assert len(NEW) >= 24 and len(set(urls)) == len(urls)
    assert not {c["url"] for c in CORPUS} & set(urls)  # none from the first corpus
    for case in NEW:
        assert case["url"].startswith("https://github.com/")
        assert case["raw"]["source"] == case["url"]
        assert "2023" <= case["date"][:4] <= "2026" and case["judge"]["cause_terms"]


@pytest.mark.parametrize("name", ["round2", "round3", "round4", "round5", "round6", "round7",
                                  "round8", "round9", "round10", "round11", "round12",
                                  "round13", "round14", "round15", "round16", "round17",
                                  "round18", "round19", "round20", "round21",
                                  "round22", "round23", "round24", "round25"])
def test_later_splits_are_the_committed_seeded_shuffles(name: str) -> None:
    import random

    cases, split, older = {"round2": (ROUND2, ROUND2_SPLIT, CORPUS + NEW),
                           "round3": (ROUND3, ROUND3_SPLIT, CORPUS + NEW + ROUND2),
                           "round4": (ROUND4, ROUND4_SPLIT, CORPUS + NEW + ROUND2 + ROUND3),
                           "round5": (ROUND5, ROUND5_SPLIT,
                                      CORPUS + NEW + ROUND2 + ROUND3 + ROUND4),
                           "round6": (ROUND6, ROUND6_SPLIT,
                                      CORPUS + NEW + ROUND2 + ROUND3 + ROUND4 + ROUND5),
                           "round7": (ROUND7, ROUND7_SPLIT,
                                      CORPUS + NEW + ROUND2 + ROUND3 + ROUND4 + ROUND5 + ROUND6),
                           "round8": (ROUND8, ROUND8_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                      + ROUND4 + ROUND5 + ROUND6 + ROUND7),
                           "round9": (ROUND9, ROUND9_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                      + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8),
                           "round10": (ROUND10, ROUND10_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9),
                           "round11": (ROUND11, ROUND11_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10),
                           "round12": (ROUND12, ROUND12_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11),
                           "round13": (ROUND13, ROUND13_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12),
                           "round14": (ROUND14, ROUND14_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13),
                           "round15": (ROUND15, ROUND15_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14),
                           "round16": (ROUND16, ROUND16_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15),
                           "round17": (ROUND17, ROUND17_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15 + ROUND16),
                           "round18": (ROUND18, ROUND18_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15 + ROUND16 + ROUND17),
                           "round19": (ROUND19, ROUND19_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15 + ROUND16 + ROUND17 + ROUND18),
                           "round20": (ROUND20, ROUND20_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15 + ROUND16 + ROUND17 + ROUND18 + ROUND19),
                           "round21": (ROUND21, ROUND21_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15 + ROUND16 + ROUND17 + ROUND18 + ROUND19
                                       + ROUND20),
                           "round22": (ROUND22, ROUND22_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15 + ROUND16 + ROUND17 + ROUND18 + ROUND19
                                       + ROUND20 + ROUND21),
                           "round23": (ROUND23, ROUND23_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15 + ROUND16 + ROUND17 + ROUND18 + ROUND19
                                       + ROUND20 + ROUND21 + ROUND22),
                           "round24": (ROUND24, ROUND24_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15 + ROUND16 + ROUND17 + ROUND18 + ROUND19
                                       + ROUND20 + ROUND21 + ROUND22 + ROUND23),
                           "round25": (ROUND25, ROUND25_SPLIT, CORPUS + NEW + ROUND2 + ROUND3
                                       + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8 + ROUND9
                                       + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14
                                       + ROUND15 + ROUND16 + ROUND17 + ROUND18 + ROUND19
                                       + ROUND20 + ROUND21 + ROUND22 + ROUND23 + ROUND24),
                           }[name]
    # round5: one URL found in an older set after the split was dropped (split["removed"]);
    # the shuffle is reproduced over the URLs as committed, the dropped one then removed.
    removed = {r["url"] for r in split.get("removed", [])}
    urls = sorted([c["url"] for c in cases] + sorted(removed))
    # round18_split.json to round25_split.json were committed without a "seed" key; their
    # seeds, 2042 to 2049, are the ones the cases' commits (b7b6c4d, 69d9fd6, c57b2a5,
    # 2c4086e, e0a4df3, 1a84170, 8bde732, c9820b3) and the rounds' briefs name, and this
    # shuffle checks them
    random.Random(split.get("seed")
                  or {"round18": 2042, "round19": 2043, "round20": 2044,
                      "round21": 2045, "round22": 2046,
                      "round23": 2047, "round24": 2048, "round25": 2049}[name]).shuffle(urls)
    k = len(urls) // 2
    assert split[f"{name}_dev"] == sorted(set(urls[:k]) - removed)
    assert split[f"{name}_heldout"] == sorted(set(urls[k:]) - removed)
    urls = [u for u in urls if u not in removed]
    # round16: 12 collected of the 24 asked (most candidates were already in earlier sets);
    # round17: 16 of the 24 asked (the round's time ran out); round18: the large round, 46
    # (the issue asked for 40 or more), seeded 2042, 23 and 23; round19: 32, seeded 2043, 16 and 16;
    # round20: 34, seeded 2044, 17 and 17; round21: 33, seeded 2045, 16 and 17;
    # round22 and round23: 40 each (the asked size), seeded 2046 and 2047, 20 and 20;
    # round24: 17 (both collectors fell short of the size aimed at), seeded 2048, 8 and 9;
    # round25: 40 (the asked size), seeded 2049, 20 and 20
    assert len(cases) >= {"round16": 12, "round17": 16, "round18": 46, "round19": 32,
                          "round20": 34, "round21": 33, "round22": 40,
                          "round23": 40, "round24": 17, "round25": 40}.get(name, 24)
    if name in ("round18", "round19", "round20", "round21", "round22", "round23", "round24",
                "round25"):
        half = {"round18": 23, "round19": 16, "round20": 17, "round21": 16,
                "round22": 20, "round23": 20, "round24": 8, "round25": 20}[name]
        assert "seed" not in split and len(split[f"{name}_dev"]) == half
        assert len(split[f"{name}_heldout"]) == len(cases) - half
    assert len(set(urls)) == len(urls)
    assert not {c["url"] for c in older} & set(urls)  # none from the older sets
    for case in cases:  # round18's collector C and round24's O also took forum threads
        assert case["url"].startswith("https://" if name in ("round18", "round24")
                                      else "https://github.com/")
        assert case["raw"]["source"] == case["url"] and (case.get("notes") or name == "round2")
        # round23: one 2022 report (nnUNet#1040), taken for want of a newer one (its "about");
        # round24: a 2022 PyTorch Forums thread and a 2022 DirectML report (its "about")
        first = "2022" if (case["url"].endswith(("MIC-DKFZ/nnUNet/issues/1040",
                                                  "automatic-fallback-to-cpu/152189",
                                                  "tensorflow-directml-plugin/issues/331"))
                           ) else "2023"
        assert first <= case["date"][:4] <= "2026" and case["judge"]["cause_terms"]


ROUND5_DEV = [c for c in ROUND5 if c["url"] in ROUND5_SPLIT["round5_dev"]]
ROUND5_HELDOUT = [c for c in ROUND5 if c["url"] in ROUND5_SPLIT["round5_heldout"]]
ROUND6_DEV = [c for c in ROUND6 if c["url"] in ROUND6_SPLIT["round6_dev"]]
ROUND6_HELDOUT = [c for c in ROUND6 if c["url"] in ROUND6_SPLIT["round6_heldout"]]
ROUND7_DEV = [c for c in ROUND7 if c["url"] in ROUND7_SPLIT["round7_dev"]]
ROUND7_HELDOUT = [c for c in ROUND7 if c["url"] in ROUND7_SPLIT["round7_heldout"]]
ROUND8_DEV = [c for c in ROUND8 if c["url"] in ROUND8_SPLIT["round8_dev"]]
ROUND8_HELDOUT = [c for c in ROUND8 if c["url"] in ROUND8_SPLIT["round8_heldout"]]
ROUND9_DEV = [c for c in ROUND9 if c["url"] in ROUND9_SPLIT["round9_dev"]]
ROUND9_HELDOUT = [c for c in ROUND9 if c["url"] in ROUND9_SPLIT["round9_heldout"]]
ROUND10_DEV = [c for c in ROUND10 if c["url"] in ROUND10_SPLIT["round10_dev"]]
ROUND10_HELDOUT = [c for c in ROUND10 if c["url"] in ROUND10_SPLIT["round10_heldout"]]
ROUND11_DEV = [c for c in ROUND11 if c["url"] in ROUND11_SPLIT["round11_dev"]]
ROUND11_HELDOUT = [c for c in ROUND11 if c["url"] in ROUND11_SPLIT["round11_heldout"]]
ROUND12_DEV = [c for c in ROUND12 if c["url"] in ROUND12_SPLIT["round12_dev"]]
ROUND12_HELDOUT = [c for c in ROUND12 if c["url"] in ROUND12_SPLIT["round12_heldout"]]
ROUND13_DEV = [c for c in ROUND13 if c["url"] in ROUND13_SPLIT["round13_dev"]]
ROUND13_HELDOUT = [c for c in ROUND13 if c["url"] in ROUND13_SPLIT["round13_heldout"]]
ROUND14_DEV = [c for c in ROUND14 if c["url"] in ROUND14_SPLIT["round14_dev"]]
ROUND14_HELDOUT = [c for c in ROUND14 if c["url"] in ROUND14_SPLIT["round14_heldout"]]
ROUND15_DEV = [c for c in ROUND15 if c["url"] in ROUND15_SPLIT["round15_dev"]]
ROUND15_HELDOUT = [c for c in ROUND15 if c["url"] in ROUND15_SPLIT["round15_heldout"]]
ROUND16_DEV = [c for c in ROUND16 if c["url"] in ROUND16_SPLIT["round16_dev"]]
ROUND16_HELDOUT = [c for c in ROUND16 if c["url"] in ROUND16_SPLIT["round16_heldout"]]
ROUND17_DEV = [c for c in ROUND17 if c["url"] in ROUND17_SPLIT["round17_dev"]]
ROUND17_HELDOUT = [c for c in ROUND17 if c["url"] in ROUND17_SPLIT["round17_heldout"]]
ROUND18_DEV = [c for c in ROUND18 if c["url"] in ROUND18_SPLIT["round18_dev"]]
ROUND18_HELDOUT = [c for c in ROUND18 if c["url"] in ROUND18_SPLIT["round18_heldout"]]
ROUND19_DEV = [c for c in ROUND19 if c["url"] in ROUND19_SPLIT["round19_dev"]]
ROUND19_HELDOUT = [c for c in ROUND19 if c["url"] in ROUND19_SPLIT["round19_heldout"]]
ROUND20_DEV = [c for c in ROUND20 if c["url"] in ROUND20_SPLIT["round20_dev"]]
ROUND20_HELDOUT = [c for c in ROUND20 if c["url"] in ROUND20_SPLIT["round20_heldout"]]
ROUND21_DEV = [c for c in ROUND21 if c["url"] in ROUND21_SPLIT["round21_dev"]]
ROUND21_HELDOUT = [c for c in ROUND21 if c["url"] in ROUND21_SPLIT["round21_heldout"]]
ROUND22_DEV = [c for c in ROUND22 if c["url"] in ROUND22_SPLIT["round22_dev"]]
ROUND22_HELDOUT = [c for c in ROUND22 if c["url"] in ROUND22_SPLIT["round22_heldout"]]
ROUND23_DEV = [c for c in ROUND23 if c["url"] in ROUND23_SPLIT["round23_dev"]]
ROUND23_HELDOUT = [c for c in ROUND23 if c["url"] in ROUND23_SPLIT["round23_heldout"]]
ROUND24_DEV = [c for c in ROUND24 if c["url"] in ROUND24_SPLIT["round24_dev"]]
ROUND24_HELDOUT = [c for c in ROUND24 if c["url"] in ROUND24_SPLIT["round24_heldout"]]
ROUND25_DEV = [c for c in ROUND25 if c["url"] in ROUND25_SPLIT["round25_dev"]]
ROUND25_HELDOUT = [c for c in ROUND25 if c["url"] in ROUND25_SPLIT["round25_heldout"]]
ALL_CASES = (CORPUS + NEW + ROUND2 + ROUND3 + ROUND4 + ROUND5 + ROUND6 + ROUND7 + ROUND8
             + ROUND9 + ROUND10 + ROUND11 + ROUND12 + ROUND13 + ROUND14 + ROUND15 + ROUND16
             + ROUND17 + ROUND18 + ROUND19 + ROUND20 + ROUND21 + ROUND22
             + ROUND23 + ROUND24 + ROUND25)


@pytest.mark.parametrize("case", ALL_CASES,
                         ids=[c["url"].split("github.com/")[-1] for c in ALL_CASES])
def test_every_case_replays_and_checks_run_clean(case: dict) -> None:
    findings = run_checks(snapshot_from_raw(case["raw"]))
    assert "doctor.check-failed" not in {f.id for f in findings}, findings


def test_corpus_figures() -> None:
    """Recall on every set; printed with -s for the report."""
    old_hit, old_n, old_missed = score(CORPUS)
    dev_hit, dev_n, dev_missed = score([c for c in NEW if c["url"] in NEW_SPLIT["new_dev"]])
    held_hit, held_n, held_missed = score(
        [c for c in NEW if c["url"] in NEW_SPLIT["new_heldout"]])
    print(f"\nenv corpus (error or warning naming the thread's cause with a working fix):\n"
          f"  cases.json, both halves seen (dev): {old_hit}/{old_n}\n"
          f"  new_dev: {dev_hit}/{dev_n}\n"
          f"  new_heldout (scored once untouched at 7/14; seen since): {held_hit}/{held_n}")
    r2_hit, r2_n, r2_missed = score([c for c in ROUND2 if c["url"] in ROUND2_SPLIT["round2_dev"]])
    r2h_hit, r2h_n, r2h_missed = score(
        [c for c in ROUND2 if c["url"] in ROUND2_SPLIT["round2_heldout"]])
    print(f"  round2_dev: {r2_hit}/{r2_n}\n"
          f"  round2_heldout (scored once untouched at 11/13; seen since): {r2h_hit}/{r2h_n}")
    r3_hit, r3_n, r3_missed = score([c for c in ROUND3 if c["url"] in ROUND3_SPLIT["round3_dev"]])
    r3h_hit, r3h_n, r3h_missed = score(
        [c for c in ROUND3 if c["url"] in ROUND3_SPLIT["round3_heldout"]])
    r4_hit, r4_n, r4_missed = score([c for c in ROUND4 if c["url"] in ROUND4_SPLIT["round4_dev"]])
    r4h_hit, r4h_n, r4h_missed = score(
        [c for c in ROUND4 if c["url"] in ROUND4_SPLIT["round4_heldout"]])
    print(f"  round3_dev: {r3_hit}/{r3_n}\n"
          f"  round3_heldout (scored once untouched at 6/12; seen since): {r3h_hit}/{r3h_n}\n"
          f"  round4_dev: {r4_hit}/{r4_n} (8/15 before its rules)\n"
          f"  round4_heldout (scored once untouched at 10/15; seen since): {r4h_hit}/{r4h_n}")
    r5_hit, r5_n, r5_missed = score(ROUND5_DEV)
    r5h_hit, r5h_n, r5h_missed = score(ROUND5_HELDOUT)
    r6_hit, r6_n, r6_missed = score(ROUND6_DEV)
    r6h_hit, r6h_n, r6h_missed = score(ROUND6_HELDOUT)
    r7_hit, r7_n, r7_missed = score(ROUND7_DEV)
    r7h_hit, r7h_n, r7h_missed = score(ROUND7_HELDOUT)
    print(f"  round5_dev: {r5_hit}/{r5_n} (5/13 before its rules)\n"
          f"  round5_heldout (scored once untouched at 10/15; seen since): {r5h_hit}/{r5h_n}\n"
          f"  round6_dev: {r6_hit}/{r6_n} (6/12 before its rules)\n"
          f"  round6_heldout (scored once untouched at 9/13; seen since): {r6h_hit}/{r6h_n}\n"
          f"  round7_dev: {r7_hit}/{r7_n} (10/15 before its rules)\n"
          f"  round7_heldout (scored once untouched at 8/15; seen since): {r7h_hit}/{r7h_n} "
          f"({100 * r7h_hit / r7h_n:.0f}%)")
    for url in r7h_missed:
        print(f"  held-out miss: {url}")
    dev_missed = (dev_missed + r2_missed + r2h_missed + r3_missed + r3h_missed + r4_missed
                  + r4h_missed + r5_missed + r5h_missed + r6_missed + r6h_missed + r7_missed)
    for url in old_missed + dev_missed:
        print(f"  dev miss: {url}")
    for url in held_missed:
        print(f"  dev miss: {url}")
    assert old_hit >= OLD_DIAGNOSED_AT_LEAST
    assert dev_hit >= NEW_DEV_DIAGNOSED_AT_LEAST
    assert held_hit >= NEW_HELDOUT_DIAGNOSED_AT_LEAST
    assert r2_hit >= ROUND2_DEV_DIAGNOSED_AT_LEAST
    assert r2h_hit >= ROUND2_HELDOUT_DIAGNOSED_AT_LEAST
    assert r3_hit >= ROUND3_DEV_DIAGNOSED_AT_LEAST
    assert r3h_hit >= ROUND3_HELDOUT_DIAGNOSED_AT_LEAST
    assert r4_hit >= ROUND4_DEV_DIAGNOSED_AT_LEAST
    assert r4h_hit >= ROUND4_HELDOUT_DIAGNOSED_AT_LEAST
    assert r5_hit >= ROUND5_DEV_DIAGNOSED_AT_LEAST
    assert r5h_hit >= ROUND5_HELDOUT_DIAGNOSED_AT_LEAST
    assert r6_hit >= ROUND6_DEV_DIAGNOSED_AT_LEAST
    assert r6h_hit >= ROUND6_HELDOUT_DIAGNOSED_AT_LEAST
    assert r7_hit >= ROUND7_DEV_DIAGNOSED_AT_LEAST and r7h_hit >= ROUND7_HELDOUT_DIAGNOSED_AT_LEAST


# The ninth set on: (its name, dev half, held-out half, dev before its rules, how the
# held-out half stands, the two floors).
LATER_SETS = [
    ("round8", ROUND8_DEV, ROUND8_HELDOUT, "11/14", "scored once untouched at 7/14; seen since",
     ROUND8_DEV_DIAGNOSED_AT_LEAST, ROUND8_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round9", ROUND9_DEV, ROUND9_HELDOUT, "7/14", "scored once untouched at 12/14; seen since",
     ROUND9_DEV_DIAGNOSED_AT_LEAST, ROUND9_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round10", ROUND10_DEV, ROUND10_HELDOUT, "9/15",
     "scored once untouched at 8/15; seen since", ROUND10_DEV_DIAGNOSED_AT_LEAST,
     ROUND10_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round11", ROUND11_DEV, ROUND11_HELDOUT, "7/14",
     "scored once untouched at 11/15; seen since", ROUND11_DEV_DIAGNOSED_AT_LEAST,
     ROUND11_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round12", ROUND12_DEV, ROUND12_HELDOUT, "10/12",
     "scored once untouched at 10/12; seen since",
     ROUND12_DEV_DIAGNOSED_AT_LEAST, ROUND12_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round13", ROUND13_DEV, ROUND13_HELDOUT, "7/12",
     "scored once untouched at 10/12; seen since",
     ROUND13_DEV_DIAGNOSED_AT_LEAST, ROUND13_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round14", ROUND14_DEV, ROUND14_HELDOUT, "8/12",
     "scored once untouched at 11/12; seen since",
     ROUND14_DEV_DIAGNOSED_AT_LEAST, ROUND14_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round15", ROUND15_DEV, ROUND15_HELDOUT, "10/12",
     "scored once untouched at 8/12; seen since",
     ROUND15_DEV_DIAGNOSED_AT_LEAST, ROUND15_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round16", ROUND16_DEV, ROUND16_HELDOUT, "3/6", "scored once untouched at 1/6; seen since",
     ROUND16_DEV_DIAGNOSED_AT_LEAST, ROUND16_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round17", ROUND17_DEV, ROUND17_HELDOUT, "4/8", "scored once untouched at 5/8; seen since",
     ROUND17_DEV_DIAGNOSED_AT_LEAST, ROUND17_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round18", ROUND18_DEV, ROUND18_HELDOUT, "7/23",
     "scored once untouched at 10/23; seen since",
     ROUND18_DEV_DIAGNOSED_AT_LEAST, ROUND18_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round19", ROUND19_DEV, ROUND19_HELDOUT, "5/16",
     "scored once untouched at 12/16; seen since",
     ROUND19_DEV_DIAGNOSED_AT_LEAST, ROUND19_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round20", ROUND20_DEV, ROUND20_HELDOUT, "6/17", "scored once untouched at 6/17; seen since",
     ROUND20_DEV_DIAGNOSED_AT_LEAST, ROUND20_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round21", ROUND21_DEV, ROUND21_HELDOUT, "10/16",
     "scored once untouched at 5/17; seen since",
     ROUND21_DEV_DIAGNOSED_AT_LEAST, ROUND21_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round22", ROUND22_DEV, ROUND22_HELDOUT, "2/20",
     "scored once untouched at 7/20; seen since",
     ROUND22_DEV_DIAGNOSED_AT_LEAST, ROUND22_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round23", ROUND23_DEV, ROUND23_HELDOUT, "7/20",
     "scored once untouched at 5/20; seen since",
     ROUND23_DEV_DIAGNOSED_AT_LEAST, ROUND23_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round24", ROUND24_DEV, ROUND24_HELDOUT, "0/8", "scored once untouched at 1/9; seen since",
     ROUND24_DEV_DIAGNOSED_AT_LEAST, ROUND24_HELDOUT_DIAGNOSED_AT_LEAST),
    ("round25", ROUND25_DEV, ROUND25_HELDOUT, "9/20", "scored once untouched at 8/20; seen since",
     ROUND25_DEV_DIAGNOSED_AT_LEAST, ROUND25_HELDOUT_DIAGNOSED_AT_LEAST),
]


@pytest.mark.parametrize("name,dev,held,before,stands,dev_floor,held_floor", LATER_SETS,
                         ids=[row[0] for row in LATER_SETS])
def test_later_set_figures(name: str, dev: list, held: list, before: str, stands: str,
                           dev_floor: int, held_floor: int) -> None:
    """Each later set: its dev half before/after its rules, its held-out half as scored
    once (and, once later rules saw it, as it is now)."""
    dev_hit, dev_n, dev_missed = score(dev)
    held_hit, held_n, held_missed = score(held)
    print(f"\n  {name}_dev: {dev_hit}/{dev_n} ({before} before its rules)\n"
          f"  {name}_heldout ({stands}): {held_hit}/{held_n} ({100 * held_hit / held_n:.0f}%)")
    for url in held_missed:
        print(f"  held-out miss: {url}")
    for url in dev_missed:
        print(f"  dev miss: {url}")
    assert dev_hit >= dev_floor
    assert held_hit >= held_floor


def test_round20_dev_figure() -> None:
    """round20_dev alone: round 21's rules were written against it."""
    dev_hit, dev_n, dev_missed = score(ROUND20_DEV)
    print(f"\n  round20_dev: {dev_hit}/{dev_n} (6/17 before its rules)")
    for url in dev_missed:
        print(f"  dev miss: {url}")
    assert dev_n == 17 and dev_hit >= ROUND20_DEV_DIAGNOSED_AT_LEAST


def test_round21_dev_figure() -> None:
    """round21_dev alone: round 22's rules are written against it; its held-out half is not
    scored here until those rules are frozen."""
    dev_hit, dev_n, dev_missed = score(ROUND21_DEV)
    print(f"\n  round21_dev: {dev_hit}/{dev_n} (10/16 before its rules)")
    for url in dev_missed:
        print(f"  dev miss: {url}")
    assert dev_n == 16 and dev_hit >= ROUND21_DEV_DIAGNOSED_AT_LEAST


def test_round22_dev_figure() -> None:
    """round22_dev alone: round 23's rules are written against it; its held-out half is not
    scored here until those rules are frozen."""
    dev_hit, dev_n, dev_missed = score(ROUND22_DEV)
    print(f"\n  round22_dev: {dev_hit}/{dev_n} (2/20 before its rules)")
    for url in dev_missed:
        print(f"  dev miss: {url}")
    assert dev_n == 20 and dev_hit >= ROUND22_DEV_DIAGNOSED_AT_LEAST


def test_round23_dev_figure() -> None:
    """round23_dev alone: round 24's rules are written against it; its held-out half is not
    scored here until those rules are frozen."""
    dev_hit, dev_n, dev_missed = score(ROUND23_DEV)
    print(f"\n  round23_dev: {dev_hit}/{dev_n} (7/20 before its rules)")
    for url in dev_missed:
        print(f"  dev miss: {url}")
    assert dev_n == 20 and dev_hit >= ROUND23_DEV_DIAGNOSED_AT_LEAST


def test_round24_dev_figure() -> None:
    """round24_dev alone: round 25's rules are written against it; its held-out half is not
    scored here until those rules are frozen."""
    dev_hit, dev_n, dev_missed = score(ROUND24_DEV)
    print(f"\n  round24_dev: {dev_hit}/{dev_n} (0/8 before its rules)")
    for url in dev_missed:
        print(f"  dev miss: {url}")
    assert dev_n == 8 and dev_hit >= ROUND24_DEV_DIAGNOSED_AT_LEAST


def test_round25_dev_figure() -> None:
    """round25_dev alone: round 26's rules are written against it; its held-out half is not
    scored here until those rules are frozen."""
    dev_hit, dev_n, dev_missed = score(ROUND25_DEV)
    print(f"\n  round25_dev: {dev_hit}/{dev_n} (9/20 before its rules)")
    for url in dev_missed:
        print(f"  dev miss: {url}")
    assert dev_n == 20 and dev_hit >= ROUND25_DEV_DIAGNOSED_AT_LEAST


HEALTHY = ["snapshots/h200_jax_torch_cuda13.json", "recorded/h200/snapshot.json",
           "snapshots/m2_tf219_metal120.json",
           "raw/mac_m3_macos145_tf219_metal120.json", "raw/mac_m1_macos151_tf218_metal120.json",
           "raw/linux_cpu_vm_tf_jax_torch.json"]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_snapshots_have_no_errors(name: str) -> None:
    path = FIXTURES / name
    snap = (load_snapshot(path) if not name.startswith("raw/")
            else snapshot_from_raw(json.loads(path.read_text(encoding="utf-8"))))
    if "h200" in name:
        snap.env_vars["KERAS_BACKEND"] = "jax"  # its one known error: no backend chosen
    errors = [f.id for f in run_checks(snap) if f.severity == "error"]
    assert errors == []


def test_the_cpu_vm_in_its_container_gets_no_gpu_warning() -> None:
    """This project's CPU VM runs in a container (/.dockerenv) with TensorFlow's default,
    CUDA-built wheel and no GPU: nothing there asks for a GPU, so no warning says one is
    missing (container.no-gpu stays info)."""
    doc = json.loads((FIXTURES / "raw/linux_cpu_vm_tf_jax_torch.json").read_text("utf-8"))
    doc["host"]["in_container"] = True
    found = run_checks(snapshot_from_raw(doc))
    assert [f.id for f in found if f.severity != "info" and "gpu" in f.id.lower()] == []
    assert "container.no-gpu" in [f.id for f in found]  # said, as info


def test_every_new_knowledge_entry_cites_its_source() -> None:
    from devicebench.env.checks import load_knowledge

    kb = load_knowledge()
    for section in ("stacks", "requires", "keras2_addons", "rocm_overrides", "jax_plugins",
                    "platform_packages", "loader_needs", "windows_import_order", "sandboxes"):
        assert kb[section], section
        for entry in kb[section]:
            assert entry["source"].startswith("https://"), (section, entry)
    assert kb["torch_variants_info"]["source"].startswith("https://")
    assert kb["rocm_from_source"]["source"].startswith("https://")
    assert kb["torch_python"]["source"].startswith("https://")
    for key in ("container_source", "virtual_mac_source"):
        assert kb["hosting"][key].startswith("https://"), key
    for release, spec in kb["torch_mps"]["releases"].items():
        assert release == "2.0" or kb["torch_mps"]["evidence"][release].startswith("https://"), spec


def test_no_printed_fix_names_a_package_of_another_platform() -> None:
    """Issue 24, class 9: every fix doctor prints on the corpus (and the healthy machines) is
    checked against the platform it is printed for, and none had to be withheld; a fix that
    names another platform's package is withheld, not printed."""
    import dataclasses

    from devicebench.env.checks import NOT_FOR_THIS_PLATFORM, load_knowledge
    from devicebench.env.checks._util import platform_conflict

    marker = NOT_FOR_THIS_PLATFORM.split("{")[0]
    for case in ALL_CASES:
        for f in run_checks(snapshot_from_raw(case["raw"])):
            assert marker not in f.fix, (case["url"], f)
    mac = snapshot_from_raw(next(c for c in NEW if c["url"].endswith("jax/issues/21383"))["raw"])
    kb = load_knowledge()
    assert platform_conflict("pip install 'jax-cuda12-plugin==0.4.28'", mac, kb)
    assert not platform_conflict("pip install 'jax==0.4.26' 'jaxlib==0.4.26'", mac, kb)
    win = dataclasses.replace(mac, host=dataclasses.replace(mac.host, os="Windows",
                                                            machine="AMD64"))
    assert platform_conflict("pip install 'tensorflow[and-cuda]'", win, kb)
    assert not platform_conflict("run it in WSL2: pip install 'tensorflow[and-cuda]'", win, kb)
