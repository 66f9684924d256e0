"""Count the kernels one call of an XLA-compiled program launches, from its text.

After XLA's optimisation passes each remaining instruction of a computation that runs
on the device (a ``fusion``, a library call such as a cuBLAS GEMM, a ``copy``, a
``convolution``) is one kernel launch; bookkeeping (``parameter``, ``constant``,
``tuple``, ``get-tuple-element``, ``bitcast``) launches nothing. A ``while`` loop runs
its condition and body once per iteration; XLA writes the trip count it proved in the
loop's ``backend_config`` (``known_trip_count``), e.g. 50 for a SimpleRNN over 50
timesteps under ``lax.scan``. No framework import here: the text comes from
``jax.jit(...).lower(...).compile().as_text()`` in the worker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Instructions that launch nothing on the device.
_FREE = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "bitcast",
                   "after-all", "partition-id", "replica-id", "opt-barrier",
                   "add-dependency", "domain"})
_HEADER = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\s([a-z][a-z0-9\-_]*)\(")
_ATTR = {name: re.compile(rf"\b{name}=%?([\w.\-]+)")
         for name in ("body", "condition", "to_apply", "true_computation",
                      "false_computation")}
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIPS = re.compile(r'known_trip_count"?\s*[:=]\s*\{\s*"?n"?\s*[:=]\s*"?(\d+)')


@dataclass(frozen=True)
class KernelCount:
    """Kernels one call of a compiled program launches.

    Attributes:
        per_call: kernels launched per call, loops unrolled by their trip counts
            (a loop whose trip count XLA did not prove counts once).
        in_program: kernel-launching instructions written in the program (each loop
            body counted once).
        in_loops: those of ``in_program`` inside while loops (body and condition).
        trips: the largest proven trip count of a loop, 0 without loops.
    """

    per_call: int
    in_program: int
    in_loops: int
    trips: int


def _computations(text: str) -> tuple[dict[str, list[str]], str | None]:
    comps: dict[str, list[str]] = {}
    entry: str | None = None
    current: list[str] | None = None
    for line in text.splitlines():
        if current is None:
            m = _HEADER.match(line)
            if m and "=" not in line.split("(", 1)[0]:
                current = comps.setdefault(m.group(2), [])
                if m.group(1):
                    entry = m.group(2)
        elif line.strip() == "}":
            current = None
        else:
            current.append(line)
    return comps, entry


def count_kernels(text: str) -> KernelCount | None:
    """Kernels of the ENTRY computation of an optimised HLO module's text; None if the
    text has no ENTRY computation.

    Example:
        >>> hlo = '''ENTRY %main (p: f32[4]) -> f32[4] {
        ...   %p = f32[4]{0} parameter(0)
        ...   ROOT %f = f32[4]{0} fusion(%p), kind=kLoop, calls=%fused
        ... }'''
        >>> count_kernels(hlo)
        KernelCount(per_call=1, in_program=1, in_loops=0, trips=0)
    """
    comps, entry = _computations(text)
    if entry is None:
        return None
    trips_seen = [0]

    def walk(name: str, depth: int, in_loop: bool) -> tuple[int, int, int]:
        """(per call, in program, in loops) of computation ``name``."""
        per_call = written = looped = 0
        if depth > 32:  # malformed or recursive text: stop, do not hang
            return 0, 0, 0
        for line in comps.get(name, []):
            m = _INSTR.match(line)
            if not m or m.group(1) in _FREE:
                continue
            op = m.group(1)
            if op == "while":
                t = _TRIPS.search(line)
                n = int(t.group(1)) if t else 1
                trips_seen[0] = max(trips_seen[0], n if t else 0)
                for part in ("body", "condition"):
                    a = _ATTR[part].search(line)
                    if a:
                        c, w, lo = walk(a.group(1), depth + 1, True)
                        per_call += c * n
                        written += w
                        looped += lo
                continue
            if op in ("call", "conditional"):
                subs = [a.group(1) for k in ("to_apply", "true_computation",
                                             "false_computation")
                        if (a := _ATTR[k].search(line))]
                if (b := _BRANCHES.search(line)):
                    subs += [s.strip().lstrip("%") for s in b.group(1).split(",")]
                counts = [walk(s, depth + 1, in_loop) for s in subs]
                if counts:  # a conditional runs one branch: the largest
                    per_call += max(c[0] for c in counts) + (op == "conditional")
                    written += sum(c[1] for c in counts)
                    looped += sum(c[2] for c in counts)
                continue
            if op.endswith("-done") or op.endswith("-update"):
                continue  # the matching -start launched it
            per_call += 1
            written += 1
            looped += in_loop
        return per_call, written, looped

    per_call, written, looped = walk(entry, 0, False)
    return KernelCount(per_call=per_call, in_program=written, in_loops=looped,
                       trips=trips_seen[0])


def kernel_placement(text: str, source: str) -> dict[str, int | str]:
    """What a trial records of a compiled step (its ``placement`` entries): kernels
    per step, in the program, in loops, the loops' trip count; ``{}`` if none."""
    count = count_kernels(text or "")
    if count is None or not count.per_call:
        return {}
    return {"kernels_per_step": count.per_call, "kernels_in_program": count.in_program,
            "loop_kernels": count.in_loops, "loop_trips": count.trips,
            "kernel_source": source}
