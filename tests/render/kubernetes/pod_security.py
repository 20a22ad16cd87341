"""Pod Security Standards, ``restricted`` profile, as rules over a pod spec: our reading of the standard
(kubernetes.io "Pod Security Standards", the rules of the restricted profile, which includes baseline), for
checking offline the pods gpucluster writes. It is not the API server's Pod Security admission (Go, not
runnable here): a pod passing these rules is one the documented profile allows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(kind) or []:
            yield f"{kind}[{c.get('name')}]", c


def restricted_violations(spec: Mapping[str, Any]) -> list[str]:
    """Every rule of the restricted profile ``spec`` (a PodSpec) breaks; empty when it passes."""
    out: list[str] = []
    pod = spec.get("securityContext") or {}
    for ns in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(ns):
            out.append(f"host namespaces: {ns}")
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(f"volume types: {v['name']} is {sorted(kinds)}")
    for sysctl in pod.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            out.append(f"sysctls: {sysctl.get('name')}")
    pod_seccomp = (pod.get("seccompProfile") or {}).get("type")
    pod_non_root = pod.get("runAsNonRoot")
    if pod.get("runAsUser") == 0:
        out.append("running as non-root user: pod runAsUser 0")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"privileged containers: {where}")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"privilege escalation: {where} does not set allowPrivilegeEscalation: false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"capabilities: {where} does not drop ALL")
        if set(caps.get("add") or []) - {"NET_BIND_SERVICE"}:
            out.append(f"capabilities: {where} adds {sorted(set(caps['add']) - {'NET_BIND_SERVICE'})}")
        if sc.get("runAsNonRoot", pod_non_root) is not True:
            out.append(f"running as non-root: {where}")
        if sc.get("runAsUser") == 0:
            out.append(f"running as non-root user: {where} runAsUser 0")
        if (sc.get("seccompProfile") or {}).get("type", pod_seccomp) not in ("RuntimeDefault", "Localhost"):
            out.append(f"seccomp: {where} has no RuntimeDefault or Localhost profile")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            out.append(f"host ports: {where}")
        if sc.get("procMount", "Default") != "Default":
            out.append(f"/proc mount type: {where}")
        selinux = {**(pod.get("seLinuxOptions") or {}), **(sc.get("seLinuxOptions") or {})}
        if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
            out.append(f"SELinux: {where}")
        if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
            out.append(f"AppArmor: {where}")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"HostProcess: {where}")
    return out
