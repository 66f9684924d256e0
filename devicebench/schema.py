"""The one JSON envelope of every ``--json`` output and every serialised outcome:
``{"schema": "devicebench.<kind>", "version": N, ...}``. A reader checks ``schema`` to know
what it holds and ``version`` to know its shape; ``version`` grows when a field changes
meaning or goes away (adding a field keeps it)."""

from __future__ import annotations

from typing import Any

# kind -> version of its shape. doctor, run, ops, report and compare carried
# "schema_version": 1 before the envelope; their version 2 is the same fields enveloped.
VERSIONS: dict[str, int] = {
    "doctor": 2, "run": 2, "ops": 2, "report": 2, "compare": 2,
    "advise": 1, "history": 1, "workloads": 1, "profile-replay": 1,
    "fleet-doctor": 1, "fleet-advise": 1, "main": 1,
}


def envelope(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` under the envelope of ``kind`` (a key of :data:`VERSIONS`).

    Example:
        >>> envelope("history", {"runs": []})
        {'schema': 'devicebench.history', 'version': 1, 'runs': []}
    """
    return {"schema": f"devicebench.{kind}", "version": VERSIONS[kind], **body}
