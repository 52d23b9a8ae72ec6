"""What the jail reported it did (``runners/jail.py``), in the words of the report's ``sandbox``.

Only facts the jail wrote on its pipe count: a namespace is "own" when the jail entered it, the
file system is read-only when every remount succeeded, /tmp is private when it was masked. Limits
and the job user are the job process's own last steps before ``execve``: the jail reports that the
job started only when all of them succeeded, so they are facts too once ``started`` is true.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def parse(data: bytes) -> dict[str, Any]:
    """Merge the JSON lines the jail wrote; a line that does not parse is ignored."""
    facts: dict[str, Any] = {}
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            facts.update(record)
    return facts


def _namespaces(jail: Mapping[str, Any]) -> set[str]:
    return set(jail.get("namespaces") or [])


def _why_not(name: str, config: Mapping[str, Any]) -> str:
    if name in (config.get("namespaces") or []):
        return "the jail did not report it"
    return "switched off or refused by this kernel"


def describe(jail: Mapping[str, Any], config: Mapping[str, Any], user: str | None) -> dict[str, str]:
    if not jail.get("started"):
        return {"started": f"no: {jail.get('error') or 'the jail reported nothing'}"}
    return {
        "user": user or "NOT dropped: the runner is not root",
        "user_namespace": (
            "namespaces created in a user namespace that maps only the runner's uid"
            if jail.get("user_namespace")
            else "not used"
        ),
        "network": _network(jail, config),
        "processes": _processes(jail, config),
        "ipc": _ipc(jail, config),
        "filesystem": _filesystem(jail),
        "tmp": _tmp(jail),
        "hidden": ", ".join(jail.get("hidden") or []) or "nothing",
        "rlimits": ", ".join(
            f"{name}={config[name]}"
            for name in ("cpu_seconds", "file_bytes", "processes", "address_space_bytes")
            if config.get(name) is not None
        )
        + ", core=0",
        "address_space": "limited" if config.get("address_space_bytes") else "unlimited (CUDA needs it)",
        "identities": _identities(jail, user),
        "seccomp": _seccomp(jail, config),
        "keyrings": _keyrings(jail),
        "memory_cgroup": jail.get("cgroup_text")
        or f"none ({config.get('cgroup_problem') or 'not reported'})",
        "privileges": "no new privileges (setuid programs do not elevate); the jail is not traceable",
        "session": "own session and process group; killed with its group and its user",
        "environment": "empty but PATH, HOME, TMPDIR, LANG, CUDA_VISIBLE_DEVICES, PYTHONPATH",
    }


def _identities(jail: Mapping[str, Any], user: str | None) -> str:
    if user is None:
        return "the runner's own uid for every process of the job"
    child = jail.get("child_uid")
    if child is None:
        return "one uid for the judge and the submission's processes"
    return (
        f"the judge runs under its own real uid, the submission's processes as uid {child} (fresh per job): "
        "they cannot signal, trace or read the judge"
    )


def _seccomp(jail: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    if jail.get("seccomp"):
        from runners.jail_filter import REFUSED

        return (
            f"libseccomp filter: {len(REFUSED)} system calls refused (keyrings, ptrace, bpf, userfaultfd, "
            "perf events, io_uring, mounts, namespaces, modules, clocks...), 32-bit calls kill"
        )
    return f"NO filter ({config.get('seccomp_refused') or 'not reported'})"


def _keyrings(jail: Mapping[str, Any]) -> str:
    session = (
        "a fresh empty session keyring"
        if jail.get("session_keyring") == "fresh"
        else "the runner's session keyring"
    )
    if jail.get("seccomp"):
        return f"{session}; keyctl, add_key and request_key refused (no per-uid keyring reachable)"
    return f"{session}; per-uid keyrings reachable (no seccomp filter)"


def _network(jail: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    if "net" in _namespaces(jail):
        return "namespace (loopback only)"
    return f"NOT isolated: no network namespace ({_why_not('net', config)})"


def _processes(jail: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    if "pid" in _namespaces(jail) and jail.get("proc") == "own":
        return "own pid namespace and /proc: the job sees only its processes, all killed with its init"
    if "pid" in _namespaces(jail):
        return "own pid namespace, but the host's /proc: the job sees the host's processes"
    return f"NOT isolated: the job sees the host's processes ({_why_not('pid', config)})"


def _ipc(jail: Mapping[str, Any], config: Mapping[str, Any]) -> str:
    if "ipc" not in _namespaces(jail):
        return f"NOT isolated: SysV IPC shared with the host ({_why_not('ipc', config)})"
    limit = jail.get("shm_limit_bytes")
    cap = f"at most {limit} bytes of shared memory" if limit else "shared memory NOT capped"
    return f"own IPC namespace: SysV shared memory, semaphores and queues die with the job; {cap}"


def _filesystem(jail: Mapping[str, Any]) -> str:
    if "mount" not in _namespaces(jail):
        return "NOT read-only: no mount namespace (only file permissions protect the host)"
    failed = jail.get("read_only_failed") or []
    if failed:
        return "read-only but the scratch folder, EXCEPT " + "; ".join(failed)
    return "read-only but the scratch folder"


def _tmp(jail: Mapping[str, Any]) -> str:
    private = jail.get("private") or []
    if not private:
        return "shared with the host (no mount namespace)"
    kept = jail.get("kept_read_only") or []
    visible = f" (read-only inside: {', '.join(kept)}, what the job runs)" if kept else ""
    return "private tmpfs for " + ", ".join(private) + visible


def gaps(jail: Mapping[str, Any], config: Mapping[str, Any], dedicated_user: bool) -> list[str]:
    """What this run's sandbox did not cover, one phrase each (the report lists them)."""
    if not jail.get("started"):
        return []
    found = [] if dedicated_user else ["runs as the runner's own user (the runner is not root)"]
    applied = _namespaces(jail)
    if "net" not in applied:
        found.append("network not isolated")
    if "pid" not in applied or jail.get("proc") != "own":
        found.append("host processes visible in /proc")
    if "ipc" not in applied:
        found.append("SysV IPC shared with the host")
    elif not jail.get("shm_limit_bytes"):
        found.append("SysV shared memory not capped")
    if "mount" not in applied:
        found.append("file system writable wherever permissions allow; /tmp, /dev/shm, /run shared")
    elif jail.get("read_only_failed"):
        found.append("not read-only: " + "; ".join(jail["read_only_failed"]))
    if dedicated_user and jail.get("child_uid") is None:
        found.append("the judge and the submission's processes share a uid")
    if not jail.get("seccomp"):
        found.append(f"no seccomp filter ({config.get('seccomp_refused') or 'not reported'})")
    if not jail.get("cgroup"):
        found.append(f"no memory or process cgroup ({config.get('cgroup_problem') or 'not reported'})")
    if jail.get("hidden_unmasked"):
        found.append("runner state NOT hidden at " + ", ".join(jail["hidden_unmasked"]))
    return found
