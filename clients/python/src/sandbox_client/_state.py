"""Reading a Sandbox's status: is it what a wait waits for, still on its
way, or never going to get there (a typed error)? Pure functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from .errors import (
    Expired,
    ForeignPodConflict,
    IdempotencyKeyConflict,
    NotReady,
    OwnerNotAuthorized,
    QuotaExceeded,
    Rejected,
    SandboxError,
    SandboxFailed,
)

READY = "Ready"
SUSPENDED = "Suspended"

# The Bound=False reasons that end a wait, with the error each is and its
# message when the condition has none. The reason decides in phase Rejected
# too: the controller refuses a run it cannot authorize (OwnerNotAuthorized)
# or a quota in Reject mode refuses (QuotaExceeded) with that phase.
_REFUSALS: Dict[str, Tuple[type, str]] = {
    "OwnerNotAuthorized": (OwnerNotAuthorized, "the workspace owner is not authorized"),
    "ForeignPodConflict": (ForeignPodConflict, "a foreign pod holds the sandbox's pod name"),
    "IdempotencyKeyConflict": (IdempotencyKeyConflict, "idempotency key conflict"),
    "QuotaExceeded": (QuotaExceeded, "quota exceeded"),
    "InvalidSpec": (Rejected, "invalid spec"),
}


@dataclass
class Outcome:
    """``done``: the state waited for; ``error``: it will not come (raise
    it); else still waiting, ``message`` says on what."""

    done: bool = False
    error: Optional[SandboxError] = None
    message: str = ""


def condition(obj: Mapping[str, Any], ctype: str) -> Dict[str, Any]:
    """The condition of that type in the status (empty when absent)."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return {}


def describe_conditions(obj: Mapping[str, Any]) -> str:
    """``phase Pending; Bound=False/Waiting: ...; Ready=False/NotBound`` or
    ``no status yet``."""
    st = obj.get("status") or {}
    parts = []
    if st.get("phase"):
        parts.append(f"phase {st['phase']}")
    for t in ("Bound", "Ready"):
        c = condition(obj, t)
        if c:
            s = f"{t}={c.get('status')}/{c.get('reason')}"
            if c.get("message"):
                s += f": {c['message']}"
            parts.append(s)
    return "; ".join(parts) if parts else "no status yet"


def is_stale(obj: Mapping[str, Any]) -> bool:
    """True while the controller has not yet written a status for the
    object's current generation (after a create or a lifecycle patch)."""
    gen = (obj.get("metadata") or {}).get("generation")
    seen = (obj.get("status") or {}).get("observedGeneration")
    if gen is None:
        return False
    return seen is None or int(seen) < int(gen)


def classify(obj: Mapping[str, Any], want: str = READY) -> Outcome:
    """Where ``obj`` stands for a wait for ``want`` (``Ready`` or
    ``Suspended``). Final states (Rejected, Expired) count even in a status
    older than the object's generation; everything else only in a current one."""
    md = obj.get("metadata") or {}
    ns, name = md.get("namespace"), md.get("name")
    st = obj.get("status") or {}
    phase = st.get("phase")
    bound = condition(obj, "Bound")
    ready = condition(obj, "Ready")
    text = describe_conditions(obj)
    kw: Dict[str, Any] = {"namespace": ns, "name": name}

    def err(cls: type, reason: Optional[str], default: str) -> Outcome:
        c = bound if bound.get("reason") == reason else ready
        msg = c.get("message") or default
        return Outcome(error=cls(f"Sandbox {ns}/{name}: {msg}", reason=reason, **kw), message=text)

    br = bound.get("reason")
    if phase == "Rejected":
        cls, default = _REFUSALS.get(br or "", (Rejected, "rejected"))
        return err(cls, br or "Rejected", default)
    if phase == "Expired":
        return err(Expired, ready.get("reason") or "Expired", "expired (its shutdownTime has passed)")
    if md.get("deletionTimestamp"):
        return Outcome(error=SandboxFailed(f"Sandbox {ns}/{name} is being deleted", reason="Deleting", **kw),
                       message=text)
    if is_stale(obj):
        return Outcome(message=f"waiting for the controller to observe generation {md.get('generation')} ({text})")
    if want == SUSPENDED:
        if phase == "Suspended":
            return Outcome(done=True, message=text)
        return Outcome(message=text)

    if bound.get("status") == "False" and br in _REFUSALS:
        cls, default = _REFUSALS[br]
        return err(cls, br, default)
    if ready.get("status") == "True":
        return Outcome(done=True, message=text)
    lifecycle = (obj.get("spec") or {}).get("lifecycle") or {}
    if phase == "Suspended" or lifecycle.get("suspend") is True:
        return Outcome(error=NotReady(f"Sandbox {ns}/{name} is suspended; resume it first", reason="Suspended",
                                      **kw), message=text)
    if phase in ("Failed", "Succeeded") or ready.get("reason") in ("PodTampered", "PodMissing", "PodFailed",
                                                                    "PodSucceeded"):
        return err(SandboxFailed, ready.get("reason") or phase, f"the pod is {phase or 'gone'}")
    return Outcome(message=text)
