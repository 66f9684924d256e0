"""The fleet's jobs on the user's machine: probe every node, pick one node per distinct
machine, run the job there as a pinned Ray task, and record what comes back in the local
results store under each node's own machine fingerprint and snapshot."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from devicebench import __version__
from devicebench.env.snapshot import EnvSnapshot
from devicebench.errors import InputError
from devicebench.fleet.cluster import FleetNode, connect, failure_line, live_nodes, on_node
from devicebench.fleet.node import probe_node


@dataclass
class NodeReport:
    """One node as its probe found it; ``problem`` (one line) keeps it out of the job."""

    node: FleetNode
    name: str = ""
    snapshot: EnvSnapshot | None = None
    findings: list[Any] = field(default_factory=list)
    replayed: str = ""  # the recorded profile a simulated node stands for
    problem: str = ""

    @property
    def fingerprint(self) -> str:
        from devicebench.store.fingerprint import machine_fingerprint

        return machine_fingerprint(self.snapshot)[0] if self.snapshot is not None else ""

    @property
    def label(self) -> str:
        """``name (cpu, gpu)``: which machine this is, in words."""
        if self.snapshot is None:
            return self.name or self.node.short_id
        h = self.snapshot.host
        gpus = [g.name for g in self.snapshot.nvidia_smi.gpus] if self.snapshot.nvidia_smi \
            else ([h.apple_chip] if h.apple_chip else [])
        return f"{self.name} ({', '.join([h.cpu_model or '?', *gpus])})"

    def line(self, text: str) -> str:
        return f"node {self.name or self.node.short_id} [{self.node.short_id}]: {text}"

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.name, "node_id": self.node.node_id, "ip": self.node.ip,
                "problem": self.problem,
                "snapshot": self.snapshot.to_dict() if self.snapshot else None,
                "findings": [f.to_dict() for f in self.findings]}


def fleet_doctor_document(reports: list[NodeReport]) -> dict[str, Any]:
    """``fleet doctor --json``: every node, in the one envelope."""
    from devicebench.schema import envelope

    return envelope("fleet-doctor", {"nodes": [r.to_dict() for r in reports]})


def _wait_all(ray, refs: dict[Any, Any], timeout: float) -> dict[Any, Any]:
    """ref -> value or the exception it raised; refs not back within ``timeout`` map to
    TimeoutError."""
    out: dict[Any, Any] = {}
    pending = list(refs)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        ready, pending = ray.wait(pending, num_returns=1,
                                  timeout=max(0.1, deadline - time.monotonic()))
        for ref in ready:
            try:
                out[ref] = ray.get(ref)
            except Exception as exc:  # a Ray failure on that node: reported per node
                out[ref] = exc
    for ref in pending:
        ray.cancel(ref, force=True)
        out[ref] = TimeoutError(f"no answer within {timeout:.0f} s")
    return out


def probe_fleet(ray, nodes: list[FleetNode], *, full: bool = False,
                frameworks: list[str] | None = None, timeout: float = 120.0) -> list[NodeReport]:
    """Probe every node (``full``: import its frameworks and run the doctor's checks).
    A node that cannot run devicebench, or runs another version, gets its one-line
    ``problem``."""
    refs = {on_node(ray, probe_node, n).remote(full, frameworks, timeout / 2): n
            for n in nodes}
    got = _wait_all(ray, refs, timeout)
    reports = []
    for ref, node in refs.items():
        value = got[ref]
        rep = NodeReport(node)
        if isinstance(value, BaseException):
            rep.problem = rep.line(failure_line(value) if not isinstance(value, TimeoutError)
                                   else f"the probe gave no answer ({value})")
        else:
            rep.name, rep.snapshot = value["name"], value["snapshot"]
            rep.findings, rep.replayed = value["findings"], value["replayed"]
            if value["version"] != __version__:
                rep.problem = rep.line(
                    f"runs devicebench {value['version'] or '(unknown)'}, this machine "
                    f"{__version__}: results and their schema must agree — "
                    f"pip install devicebench=={__version__} there")
        reports.append(rep)
    return reports


def choose_nodes(reports: list[NodeReport], names: list[str] | None
                 ) -> tuple[list[NodeReport], list[str]]:
    """The nodes to run on: those ``names`` name (node id prefix, IP or name), else one
    node per distinct machine (fingerprint), the user's own first; and a line for each
    node left out for a problem.

    Raises:
        InputError: a name that matches no node.
    """
    usable = [r for r in reports if not r.problem]
    if names:  # only the named nodes' problems concern the user
        chosen, notes = [], []
        for name in names:
            hit = [r for r in reports if name in (r.name, r.node.ip)
                   or r.node.node_id.startswith(name)]
            if not hit:
                known = ", ".join(f"{r.name or '?'} [{r.node.short_id}]" for r in reports)
                raise InputError(f"no node {name!r} in the cluster",
                                 fix=f"name one of: {known}")
            chosen += [r for r in hit if not r.problem and r not in chosen]
            notes += [r.problem for r in hit if r.problem and r.problem not in notes]
        return chosen, notes
    notes = [r.problem for r in reports if r.problem]
    first: dict[str, NodeReport] = {}
    for r in usable:
        first.setdefault(r.fingerprint, r)
    return list(first.values()), notes


def same_machines(reports: list[NodeReport], chosen: list[NodeReport]) -> list[str]:
    """A line for each usable node left out because a chosen node is the same machine
    (same fingerprint: the same hardware and versions measure the same)."""
    by = {r.fingerprint: r for r in chosen}
    return [r.line(f"the same machine as {by[r.fingerprint].name} (fingerprint "
                   f"{r.fingerprint}): advised there once")
            for r in reports if not r.problem and r not in chosen and r.fingerprint in by]


def lacks(report: NodeReport, baseline: str | None) -> str:
    """Why this node cannot run the advise asked for ("" when it can)."""
    from devicebench.trials.plan import installed_backends

    have = installed_backends(report.snapshot) if report.snapshot else []
    if not have:
        return report.line("no deep-learning framework is installed there, and advise "
                           "needs one — pip install 'devicebench[tensorflow,jax]' there")
    for item in (baseline or "").split(","):
        key, _, value = item.partition("=")
        if key.strip() == "backend" and value.strip() not in have:
            return report.line(f"has no {value.strip()} (the --baseline needs it; it has "
                               f"{', '.join(have)}) — install it there or change --baseline")
    return ""


@dataclass
class MachineRun:
    """One machine's share of a fleet job and what came back of it."""

    report: NodeReport
    run_id: int | None = None
    status: str = "running"  # ok | lost | failed | cancelled
    reason: str = ""
    advice: Any = None  # devicebench.advisor.advice.AdviceResult
    trials: list[Any] = field(default_factory=list)  # TrialResult, as they arrived
    shipped_as: str = ""  # the workload's reference on the node, when files were shipped
    summary: dict[str, Any] | None = None  # the advice as stored (the user's reference)


@dataclass
class FleetAdvice:
    """What ``fleet advise`` found: one :class:`MachineRun` per machine, the lines for
    nodes left out, and whether Ctrl-C cut it short."""

    fleet_id: str
    workload: str
    machines: list[MachineRun]
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    interrupted: bool = False
    same: list[str] = field(default_factory=list)  # nodes that are a chosen node's machine

    def answer(self):
        """Where this model should train: :func:`devicebench.fleet.answer.where_to_train`."""
        from devicebench.fleet.answer import MachineFacts, where_to_train

        return where_to_train([MachineFacts(
            m.report.name, m.report.label, m.report.fingerprint, m.status, m.reason,
            m.report.node.is_driver, m.summary, m.trials)
            for m in self.machines])

    def to_dict(self) -> dict[str, Any]:
        """``fleet advise --json``: the answer per machine, in the one envelope."""
        from devicebench.schema import envelope

        return envelope("fleet-advise", {
            "fleet": self.fleet_id, "workload": self.workload, "elapsed_s": self.elapsed_s,
            "interrupted": self.interrupted, "left_out": self.notes,
            "machines": [a.to_dict() for a in self.answer()]})


def _fleet_options(fleet_id: str, rep: NodeReport, status: str = "running",
                   reason: str = "") -> dict[str, Any]:
    return {"id": fleet_id, "node": rep.name, "node_id": rep.node.node_id,
            "ip": rep.node.ip, "devices": rep.node.devices, "replayed": rep.replayed,
            "user_machine": rep.node.is_driver, "status": status, "reason": reason}


def _as_sent(result, shipped_as: str, workload: str):
    """A trial of a shipped workload under the reference the user gave (not the node's
    temporary copy, gone once the task ends)."""
    if not shipped_as or result.spec.workload != shipped_as:
        return result
    return replace(result, spec=result.spec.with_(workload=workload))


def _summary_as_sent(advice, shipped_as: str, workload: str) -> dict[str, Any]:
    d = advice.to_dict()
    if not shipped_as:
        return d
    text = json.dumps(d, default=str).replace(json.dumps(shipped_as)[1:-1],
                                              json.dumps(workload)[1:-1])
    return json.loads(text)


def fleet_advise(workload: str, *, budget: float = 60.0, baseline: str | None = None,
                 epochs: int | None = None, allow_batch_change: bool = False,
                 nodes: list[str] | None = None, address: str | None = None,
                 db: Path | None = None, timeout: float | None = None,
                 argv: list[str] | None = None,
                 on_event: Callable[[str, MachineRun, Any], None] | None = None
                 ) -> FleetAdvice:
    """``advise`` on every distinct machine of the cluster (or the ``nodes`` named), at
    once: each node runs it with its own worker processes and streams its trials back;
    each is stored here as it arrives, under that node's machine. A node that dies
    mid-run is marked lost (its stored trials kept) and the rest go on; Ctrl-C cancels
    the tasks still running and returns what finished (``interrupted``).

    Raises:
        devicebench.errors.DevicebenchError: no Ray, no cluster at ``address``, an
            unknown workload or node, no node able to run it (one line each).
    """
    from devicebench.fleet.node import advise_on_node
    from devicebench.fleet.ship import pack_workload
    from devicebench.store import ResultStore
    from devicebench.workloads.loader import validate_workload_ref

    validate_workload_ref(workload)
    template, files = pack_workload(workload)
    t0 = time.monotonic()
    ray = connect(address)
    reports = probe_fleet(ray, live_nodes(ray))
    chosen, notes = choose_nodes(reports, nodes)
    same = [] if nodes else same_machines(reports, chosen)
    runnable = []
    for rep in chosen:
        why = lacks(rep, baseline)
        (notes.append(why) if why else runnable.append(rep))
    if not runnable:
        raise InputError("no node of the cluster can run this advise" +
                         (": " + "; ".join(notes) if notes else ""),
                         fix="install what each node lacks there, or name others with --node")
    fleet_id = uuid.uuid4().hex[:12]
    request = ray.put({"workload": template, "files": files, "budget": budget,
                       "baseline": baseline, "epochs": epochs,
                       "allow_batch_change": allow_batch_change})  # the object store
    result = FleetAdvice(fleet_id, workload, [MachineRun(r) for r in runnable], notes,
                         same=same)
    limit = timeout if timeout is not None else 3 * budget + 600
    with ResultStore.open(db) as store:
        def close(m: MachineRun, status: str, reason: str = "", summary=None) -> None:
            m.status, m.reason = status, reason
            store.finish_run(m.run_id, summary=(summary or {}) | {
                "fleet": _fleet_options(fleet_id, m.report, status, reason)})
            if on_event:
                on_event(status, m, None)

        gens = {}
        for m in result.machines:
            machine_id = store.add_machine(m.report.snapshot)
            m.run_id = store.start_run(machine_id, "advise", {
                "argv": argv or [], "workload": workload, "budget": budget,
                "fleet": _fleet_options(fleet_id, m.report)})
            gens[on_node(ray, advise_on_node, m.report.node, hold_devices=True)
                 .remote(request)] = m
        pending = list(gens)
        deadline = t0 + limit
        try:
            while pending:
                if time.monotonic() > deadline:
                    for g in pending:
                        ray.cancel(g, force=True)
                        close(gens[g], "failed", f"no answer within {limit:.0f} s")
                    break
                ready, pending = ray.wait(pending, num_returns=1, timeout=1.0)
                for g in ready:
                    m = gens[g]
                    try:
                        kind, value = ray.get(next(g))
                    except StopIteration:
                        if m.status == "running":
                            close(m, "failed", "the node ended without an answer")
                        continue
                    except Exception as exc:  # Ray: the node died, or its task failed
                        died = isinstance(exc, ray.exceptions.NodeDiedError |
                                          ray.exceptions.WorkerCrashedError)
                        close(m, "lost" if died else "failed", failure_line(exc))
                        continue
                    if kind == "shipped":
                        m.shipped_as = value
                    elif kind == "trial":
                        value = _as_sent(value, m.shipped_as, workload)
                        store.add_trial(m.run_id, value)
                        m.trials.append(value)
                        if on_event:
                            on_event("trial", m, value)
                    elif kind == "event" and on_event:
                        on_event("event", m, value)
                    elif kind == "advice":
                        m.advice = value
                        m.summary = _summary_as_sent(value, m.shipped_as, workload)
                        close(m, "ok", summary=m.summary)
                    elif kind == "error":
                        close(m, "failed", m.report.line(value[0]))
                    pending.append(g)
        except KeyboardInterrupt:
            result.interrupted = True
            for g, m in gens.items():
                if m.status == "running":
                    ray.cancel(g, force=True)
            for m in result.machines:
                if m.status == "running":
                    close(m, "cancelled", "interrupted (Ctrl-C): its finished trials are kept")
    result.elapsed_s = time.monotonic() - t0
    return result


def fleet_doctor(*, address: str | None = None, frameworks: list[str] | None = None,
                 nodes: list[str] | None = None, timeout: float = 180.0) -> list[NodeReport]:
    """The doctor on every node (frameworks imported there, checks run there)."""
    ray = connect(address)
    reports = probe_fleet(ray, live_nodes(ray), full=True, frameworks=frameworks,
                          timeout=timeout)
    if nodes:
        chosen, _ = choose_nodes(reports, nodes)
        reports = [r for r in reports if r in chosen or r.problem]
    return reports


def fleet_resources_here() -> str:
    """``ray start --resources`` JSON for this machine (no Ray needed)."""
    from devicebench.env.probe import probe_host_layer
    from devicebench.fleet.resources import resources_json

    return resources_json(probe_host_layer())


@dataclass
class RecordedProfile:
    """One machine's profile from ``fleet profile record``: where it was written, or why
    there is none."""

    report: NodeReport
    path: Path | None = None
    note: str = ""
    problem: str = ""


def fleet_profile_record(workloads: list[str] | None, out_dir: Path, *, max_rounds: int = 12,
                         nodes: list[str] | None = None, address: str | None = None,
                         timeout: float = 3600.0) -> tuple[list[RecordedProfile], list[str]]:
    """``profile record`` on every distinct machine at once (``workloads`` None: as
    ``profile record``'s), each profile written to
    ``out_dir/<node name>.json``: one library the user can replay (``profile replay
    FILE``) and share. Returns the profiles and the lines for nodes left out.

    Raises:
        devicebench.errors.DevicebenchError: no Ray or cluster, an unknown workload or node.
    """
    from devicebench.fleet.node import record_on_node
    from devicebench.jobs.profile import DEFAULT_WORKLOADS
    from devicebench.workloads import get_workload

    workloads = list(DEFAULT_WORKLOADS if workloads is None else workloads)
    for w in workloads:
        get_workload(w)  # unknown names: one line, exit 2
    ray = connect(address)
    chosen, notes = choose_nodes(probe_fleet(ray, live_nodes(ray)), nodes)
    out_dir.mkdir(parents=True, exist_ok=True)
    refs = {on_node(ray, record_on_node, r.node, hold_devices=True)
            .remote(workloads, max_rounds): r for r in chosen}
    got = _wait_all(ray, refs, timeout)
    out = []
    for ref, rep in refs.items():
        value = got[ref]
        if isinstance(value, BaseException):
            out.append(RecordedProfile(rep, problem=rep.line(failure_line(value))))
            continue
        path = out_dir / f"{value['name'] or rep.node.short_id}.json"
        value["profile"].save(path)
        out.append(RecordedProfile(rep, path, value["note"]))
    return out, notes
