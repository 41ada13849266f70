"""What ``--redact`` takes out of a report before it is published: host names and the
folders of file paths.

A pull-request comment or a static site may be public while the machine that
measured is not: its name, and the paths of a user's home or a CI runner's work
folder (a failed run's traceback quotes them), say more than the figures need.
``environment(env)`` is an environment without the facts that name the host;
``text(s, hosts)`` writes each of ``hosts`` (and this machine's name) as
``<host>`` and each absolute path as its last part (``…/bench.py``).

Example:
    >>> text('File "/home/ann/proj/bench.py", line 3, on ci-runner-7', ["ci-runner-7"])
    'File "…/bench.py", line 3, on <host>'
    >>> environment({"hostname": "ci-runner-7", "python": "3.11.7"})
    {'python': '3.11.7'}
"""
from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["HOST_FACTS", "environment", "hosts_of", "text"]

# Environment facts that name the machine (a sweep worker's is ``host:pid``).
HOST_FACTS = ("hostname", "worker")
# A POSIX path from the root or a home (at least one folder deep), or a Windows one.
_STOP = r"\s'\"<>|;,()\[\]{}"
_PATH = re.compile(rf"(?<![\w.~/-])(?:~|[A-Za-z]:)?[/\\](?:[^{_STOP}/\\:]+[/\\])+"
                   rf"(?P<name>[^{_STOP}/\\:]*)")


def environment(env: Mapping[str, Any]) -> dict[str, Any]:
    """``env`` without the facts that name the machine (``HOST_FACTS``)."""
    return {k: v for k, v in env.items() if k not in HOST_FACTS}


def hosts_of(*environments: Mapping[str, Any]) -> list[str]:
    """The host names ``environments`` record, and this machine's."""
    names = [socket.gethostname()]
    for env in environments:
        for fact in HOST_FACTS:
            value = env.get(fact)
            if isinstance(value, str) and value:
                names.append(value.rsplit(":", 1)[0] if fact == "worker" else value)
    return list(dict.fromkeys(names))


def text(s: str, hosts: Iterable[str] = ()) -> str:
    """``s`` with each absolute path shortened to its last part and each of ``hosts``
    (whole words of three characters or more: shorter ones are not told from words)
    and this machine's name written ``<host>``."""
    s = _PATH.sub(lambda m: "…/" + m.group("name"), s)
    for host in sorted({*hosts, socket.gethostname()}, key=len, reverse=True):
        if len(host) >= 3:
            s = re.sub(rf"(?<![\w.-]){re.escape(host)}(?![\w-])", "<host>", s, flags=re.I)
    return s
