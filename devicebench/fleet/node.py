"""What runs on each node, inside a Ray worker there: devicebench's own jobs (the probe,
the doctor's checks, ``advise`` with its worker processes local to the node, the profile
sweep), their results handed back through Ray. Nothing here imports Ray."""

from __future__ import annotations

import platform
import queue
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from devicebench import __version__
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import DevicebenchError
from devicebench.fleet.ship import unpack_workload
from devicebench.fleet.simulate import read_simulation, simulated_snapshot


def node_identity(full: bool = False, frameworks: list[str] | None = None,
                  timeout: float = 60.0) -> tuple[EnvSnapshot, Any, str]:
    """This node's snapshot (host layer; ``full``: every framework imported too), the
    recorded profile it stands for (a simulated node, else None) and its name."""
    from devicebench.env.probe import probe_environment, probe_host_layer

    sim = read_simulation()
    if sim is not None and sim.profile:
        from devicebench.profiles import load_profile

        prof = load_profile(sim.profile)
        snap = prof.env_snapshot()
        snap.devicebench_version = sim.devicebench_version or __version__
        return snap, prof, sim.name or prof.name
    snap = probe_environment(frameworks, timeout=timeout) if full else probe_host_layer()
    if sim is not None:
        snap = simulated_snapshot(snap, sim)
    return snap, None, (sim.name if sim and sim.name else platform.node())


def probe_node(full: bool = False, frameworks: list[str] | None = None,
               timeout: float = 60.0) -> dict[str, Any]:
    """The node's identity for the driver: name, devicebench version, snapshot and (with
    ``full``) the doctor's findings."""
    snap, prof, name = node_identity(full, frameworks, timeout)
    findings = []
    if full:
        from devicebench.env.checks import run_checks

        findings = run_checks(snap)
    return {"name": name, "version": snap.devicebench_version, "snapshot": snap,
            "findings": findings, "replayed": prof.name if prof is not None else "",
            "hostname": platform.node()}


PROGRESS = ("setup", "round")  # the engine's events worth sending to the user's machine


def _advise(request: dict[str, Any], put) -> None:
    from devicebench.advisor.advice import parse_baseline
    from devicebench.errors import InputError
    from devicebench.jobs import default_of
    from devicebench.jobs.advise import run_advice
    from devicebench.jobs.advise_any import advise
    from devicebench.profiles.replay import replay_advise
    from devicebench.progress import silent

    snap, prof, _ = node_identity()
    workload = request["workload"]
    with tempfile.TemporaryDirectory(prefix="devicebench-fleet-") as tmp:
        ref = unpack_workload(workload, request.get("files", {}), Path(tmp))
        if ref != workload:
            put(("shipped", ref))  # where the user's files landed on this node
        if prof is not None:
            if ref not in prof.workloads:
                raise InputError(f"this node replays the {prof.name} profile, which has no "
                                 f"workload {ref!r}",
                                 fix=f"use one of: {', '.join(prof.workloads)}")
            base = request.get("baseline")
            spec = parse_baseline(base, ref, "tensorflow") if base else None
            advice, _ = replay_advise(prof, ref, budget_s=request["budget"], baseline=spec,
                                      epochs=request.get("epochs"),
                                      on_result=lambda r: put(("trial", r)))
        else:
            advice = run_advice(ref, baseline=request.get("baseline"),
                                budget=request["budget"],
                                allow_batch_change=request.get("allow_batch_change", False),
                                db=Path(tmp) / "node.db", snapshot=snap,
                                epochs=request.get("epochs"),
                                equivalence_steps=default_of(advise, "equivalence_steps"),
                                on_progress=silent,  # the events go to the user's machine
                                on_result=lambda r: put(("trial", r)),
                                on_event=lambda kind, spec, info: put(("event", (
                                    kind, spec.label if spec else "", info)))
                                if kind in PROGRESS else None)
    put(("advice", advice))


def advise_on_node(request: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """``advise`` on this node: yields ``("trial", TrialResult)`` as each trial is
    measured, ``("event", (kind, label, info))`` as a trial is set up or a round of
    interleaved blocks starts, then ``("advice", AdviceResult)``, or
    ``("error", (message, exit code))``.

    The advisor runs in a thread so its trials stream out while it works; its worker
    processes are this node's own, as a local ``advise`` starts them.
    """
    out: queue.Queue[tuple[str, Any]] = queue.Queue()

    def work() -> None:
        try:
            _advise(request, out.put)
        except DevicebenchError as exc:
            out.put(("error", (exc.message, exc.exit_code)))
        except Exception as exc:  # reported on the user's machine, one line
            out.put(("error", (f"{type(exc).__name__}: {exc}", 1)))
        finally:
            out.put(("done", None))

    threading.Thread(target=work, name="devicebench-fleet-advise", daemon=True).start()
    while True:
        kind, value = out.get()
        if kind == "done":
            return
        yield kind, value


def record_on_node(workloads: list[str], max_rounds: int) -> dict[str, Any]:
    """``profile record`` on this node: the profile (a node that stands for a recorded
    profile hands that profile back, saying so)."""
    from devicebench.advisor.advice import default_baseline
    from devicebench.profiles.record import record_profile

    snap, prof, name = node_identity()
    if prof is not None:
        return {"name": name, "profile": prof,
                "note": f"replays the recorded {prof.name} profile: handed back as recorded"}
    host = snap.host
    label = (f"{host.cpu_model} ({host.cpu_cores_logical} logical cores), {host.os} "
             f"{host.os_version}")
    profile = record_profile(name, label, snap, workloads,
                             baseline_for=lambda w: default_baseline(snap, w)[0],
                             max_rounds=max_rounds)
    return {"name": name, "profile": profile, "note": "; ".join(profile.notes)}
