"""Reading a Sandbox's status: is it what a wait waits for, still on its
way, or never going to get there (a typed error)? Pure functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional

from .errors import (
    Expired,
    ForeignPodConflict,
    IdempotencyKeyConflict,
    NotReady,
    OwnerNotAuthorized,
    Rejected,
    SandboxError,
    SandboxFailed,
)

READY = "Ready"
SUSPENDED = "Suspended"


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

    if phase == "Rejected":
        if bound.get("reason") == "IdempotencyKeyConflict":
            return err(IdempotencyKeyConflict, "IdempotencyKeyConflict", "idempotency key conflict")
        return err(Rejected, bound.get("reason") or "Rejected", "rejected")
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

    br = bound.get("reason")
    if bound.get("status") == "False":
        if br == "OwnerNotAuthorized":
            return err(OwnerNotAuthorized, br, "the workspace owner is not authorized")
        if br == "ForeignPodConflict":
            return err(ForeignPodConflict, br, "a foreign pod holds the sandbox's pod name")
        if br == "IdempotencyKeyConflict":
            return err(IdempotencyKeyConflict, br, "idempotency key conflict")
        if br == "InvalidSpec":
            return err(Rejected, br, "invalid spec")
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
