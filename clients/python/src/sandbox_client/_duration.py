"""Durations (``90s``, ``15m``, ``2h``, ``1h30m``, ``1d``) and RFC 3339 times."""

from __future__ import annotations

import datetime as dt
import re
from typing import Optional, Union

Duration = Union[dt.timedelta, int, float, str]

_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")


def parse_duration(value: Duration) -> dt.timedelta:
    """A positive duration from a ``timedelta``, a number of seconds, or a
    string of ``<number><s|m|h|d>`` parts (``1h30m``); a bare number string
    is seconds."""
    if isinstance(value, dt.timedelta):
        d = value
    elif isinstance(value, bool):
        raise TypeError("a duration is not a bool")
    elif isinstance(value, (int, float)):
        d = dt.timedelta(seconds=value)
    elif isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"\d+(?:\.\d+)?", s):
            d = dt.timedelta(seconds=float(s))
        else:
            pos, total = 0, 0.0
            for m in _PART.finditer(s):
                if m.start() != pos:
                    break
                total += float(m.group(1)) * _UNIT[m.group(2)]
                pos = m.end()
            if pos != len(s) or not s:
                raise ValueError(f"invalid duration {value!r} (examples: 90s, 15m, 2h, 1h30m, 1d)")
            d = dt.timedelta(seconds=total)
    else:
        raise TypeError(f"invalid duration {value!r}")
    if d <= dt.timedelta(0):
        raise ValueError(f"duration must be positive, not {value!r}")
    return d


def rfc3339(t: dt.datetime) -> str:
    """``t`` in UTC as RFC 3339 with whole seconds (``2026-05-01T10:00:00Z``);
    a naive ``t`` is taken as UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.astimezone(dt.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(s: Optional[str]) -> Optional[dt.datetime]:
    """An RFC 3339 time as an aware ``datetime`` (``None`` for ``None``)."""
    if not s:
        return None
    x = s.strip()
    if x.endswith("Z") or x.endswith("z"):
        x = x[:-1] + "+00:00"
    return dt.datetime.fromisoformat(x)


def shutdown_time(after: Duration, now: Optional[dt.datetime] = None) -> str:
    """The ``shutdownTime`` that lies ``after`` from ``now`` (default: the
    current time), rounded up to the next whole second."""
    base = now or dt.datetime.now(dt.timezone.utc)
    t = base + parse_duration(after)
    if t.microsecond:
        t = t.replace(microsecond=0) + dt.timedelta(seconds=1)
    return rfc3339(t)
