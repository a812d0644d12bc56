"""A connector that runs each exec locally (``subprocess`` in a folder),
as kwok's local exec does, and answers with the frames the API server would
send: stdout on channel 1, stderr on 2, the ``metav1.Status`` on 3. It lets
the shell programs of the file methods run for real without a cluster."""

from __future__ import annotations

import json
import subprocess
from typing import List, Optional, Sequence, Tuple

from sandbox_client._exec import Frames


class ScriptedFrames(Frames):
    """Frames given in advance; ``None`` ends the stream, an exception is raised."""

    def __init__(self, frames: List[object]) -> None:
        self.frames = list(frames)
        self.closed = False

    def recv(self, timeout: float) -> Optional[Tuple[int, bytes]]:
        if not self.frames:
            return None
        f = self.frames.pop(0)
        if isinstance(f, BaseException):
            raise f
        return f  # type: ignore[return-value]

    def close(self) -> None:
        self.closed = True


def success() -> Tuple[int, bytes]:
    return 3, b'{"metadata":{},"status":"Success"}'


def nonzero(code: int) -> Tuple[int, bytes]:
    st = {"metadata": {}, "status": "Failure", "message": f"command terminated with non-zero exit code: {code}",
          "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
    return 3, json.dumps(st).encode()


class LocalPod:
    """Runs argv in ``workdir``; records every argv. Output is cut into
    frames of ``frame`` bytes (splitting UTF-8 sequences, as the network may)."""

    def __init__(self, workdir: str, frame: int = 1000) -> None:
        self.workdir = workdir
        self.frame = frame
        self.calls: List[List[str]] = []

    def __call__(self, namespace: str, pod: str, container: str, argv: Sequence[str], timeout: float) -> Frames:
        self.calls.append(list(argv))
        p = subprocess.run(list(argv), cwd=self.workdir, capture_output=True, timeout=timeout)
        frames: List[object] = []
        for ch, data in ((1, p.stdout), (2, p.stderr)):
            for i in range(0, len(data), self.frame):
                frames.append((ch, data[i:i + self.frame]))
        frames.append(success() if p.returncode == 0 else nonzero(p.returncode))
        return ScriptedFrames(frames)
