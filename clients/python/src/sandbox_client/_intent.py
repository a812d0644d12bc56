"""What a create asks for, and whether a stored Sandbox is that request.

Pure functions (no API calls), so the verification a create makes after
``AlreadyExists`` is unit-tested on its own.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

# The CRD's schema default (contract section 2): the server stores it in
# every Sandbox created without resources.
DEFAULT_RESOURCES: Dict[str, Dict[str, str]] = {
    "requests": {"cpu": "2", "memory": "4Gi"},
    "limits": {"cpu": "2", "memory": "4Gi"},
}

EnvLike = Union[Mapping[str, str], Sequence[Mapping[str, str]]]


def normalize_resources(resources: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Dict[str, str]]]:
    """Resources as the spec holds them (core/v1 ResourceRequirements), with
    every quantity a string. ``{"cpu": "1", "memory": "2Gi"}`` (no
    ``requests``/``limits`` level) is shorthand for requests = limits."""
    if resources is None:
        return None
    if not isinstance(resources, Mapping):
        raise TypeError("resources must be a mapping")
    if set(resources) - {"requests", "limits"}:
        if set(resources) & {"requests", "limits"}:
            raise ValueError("resources mixes requests/limits with resource names")
        flat = {str(k): _quantity(v) for k, v in resources.items()}
        return {"requests": dict(flat), "limits": dict(flat)}
    out: Dict[str, Dict[str, str]] = {}
    for level in ("requests", "limits"):
        if level in resources and resources[level] is not None:
            out[level] = {str(k): _quantity(v) for k, v in resources[level].items()}
    return out


def _quantity(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise TypeError(f"a resource quantity must be a number or a string, not {v!r}")
    return str(v)


def normalize_env(env: Optional[EnvLike]) -> Optional[List[Dict[str, str]]]:
    """``env`` as the spec's list of ``{name, value}``, in the given order."""
    if env is None:
        return None
    if isinstance(env, Mapping):
        return [{"name": str(k), "value": str(v)} for k, v in env.items()]
    out = []
    for e in env:
        item = {"name": str(e["name"])}
        if e.get("value") is not None:
            item["value"] = str(e["value"])
        out.append(item)
    return out


def build_spec(
    image: str,
    *,
    command: Optional[Sequence[str]] = None,
    args: Optional[Sequence[str]] = None,
    env: Optional[EnvLike] = None,
    owner: Optional[str] = None,
    key: Optional[str] = None,
    resources: Optional[Mapping[str, Any]] = None,
    runtime_class: Optional[str] = None,
    lifecycle: Optional[Mapping[str, Any]] = None,
    network_profiles: Optional[Sequence[str]] = None,
) -> Dict[str, Any]:
    """The ``spec`` of a new Sandbox. Absent arguments are left out (the
    server applies its defaults); an empty owner is refused here as the
    server would refuse it."""
    if not image:
        raise ValueError("image is required")
    if owner is not None and owner == "":
        raise ValueError('owner "" is invalid; omit it for a sandbox without a shared workspace')
    if key is not None and key == "":
        raise ValueError("key must be 1 to 255 bytes")
    if isinstance(command, str) or isinstance(args, str) or isinstance(network_profiles, str):
        raise TypeError("command, args and network_profiles are lists of strings")
    spec: Dict[str, Any] = {"image": image}
    if command is not None:
        spec["command"] = [str(c) for c in command]
    if args is not None:
        spec["args"] = [str(a) for a in args]
    e = normalize_env(env)
    if e is not None:
        spec["env"] = e
    r = normalize_resources(resources)
    if r is not None:
        spec["resources"] = r
    if runtime_class is not None:
        spec["runtimeClassName"] = runtime_class
    if key is not None:
        spec["idempotencyKey"] = key
    if owner is not None:
        spec["workspaceOwner"] = owner
    if network_profiles:
        spec["network"] = {"profiles": [str(p) for p in network_profiles]}
    if lifecycle:
        spec["lifecycle"] = dict(lifecycle)
    return spec


def _comparable(spec: Mapping[str, Any]) -> Dict[str, Any]:
    s = copy.deepcopy(dict(spec))
    s.pop("lifecycle", None)
    if s.get("resources") is None:
        s["resources"] = copy.deepcopy(DEFAULT_RESOURCES)
    else:
        s["resources"] = normalize_resources(s["resources"]) or {}
    return s


def intent_difference(sent: Mapping[str, Any], stored: Mapping[str, Any]) -> Optional[str]:
    """``None`` when the stored spec is the request that ``sent`` made, else
    a sentence naming the first field that differs.

    The server stores defaults (resources requests = limits = cpu 2, memory
    4Gi when none were sent), so a request without resources matches a stored
    spec holding exactly the default; quantities compare as strings (the
    server keeps them as sent). ``lifecycle`` is not compared: it is mutable
    and not part of the intent."""
    a = _comparable(sent)
    b = _comparable(stored)
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            here = "absent" if k not in a else repr(a[k])
            there = "absent" if k not in b else repr(b[k])
            return f"spec.{k} differs (this request: {_clip(here)}; stored: {_clip(there)})"
    return None


def identity_difference(sent: Mapping[str, Any], stored: Mapping[str, Any]) -> Optional[str]:
    """``None`` when key and owner are the same, else which one differs."""
    for field, label in (("idempotencyKey", "idempotency key"), ("workspaceOwner", "workspace owner")):
        if sent.get(field) != stored.get(field):
            return f"its {label} is {_clip(repr(stored.get(field)))}, not {_clip(repr(sent.get(field)))}"
    return None


def _clip(s: str, n: int = 120) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."
