"""deploy/kubernetes, parsed and checked against kilnd itself. No cluster runs here.

Every check returns the problems it finds, each naming the file and the field;
the real manifests must have none. Each check is also run on a copy of the
directory with one thing broken (a wrong port, a flag kilnd does not have, a
miscounted kiln_sandbox...) and must report it, so that none passes by being
unable to fail. kilnd's flags, their types and defaults come from the real
`kilnd --help` (KILN_BIN_DIR); nothing starts a daemon.
"""
import json
import math
import re
import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

import pytest
import yaml

from conftest import BIN_DIR, REPO

DEPLOY = REPO / "deploy" / "kubernetes"
SANDBOX_RESOURCE = "kiln_sandbox"  # the Ray resource kiln's Ray integration asks for
HEALTH = "/v1/health"
NAMESPACE = "kiln-system"

# (apiVersion, kind) pairs served by current Kubernetes (1.29+) and KubeRay
# (ray.io/v1 since 1.0); older ones (apps/v1beta2, ray.io/v1alpha1...) are gone.
SERVED = {("v1", "Namespace"), ("v1", "ConfigMap"), ("v1", "Secret"), ("v1", "Service"),
          ("v1", "ServiceAccount"), ("apps/v1", "DaemonSet"), ("apps/v1", "Deployment"),
          ("ray.io/v1", "RayCluster"), ("kustomize.config.k8s.io/v1beta1", "Kustomization")}
CLUSTER_SCOPED = {"Namespace"}
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, when there
PRICE_KEYS = {"vcpuHourMicros", "gibHourMicros", "cpuFloorMillis", "snapshotGbMonthMicros"}


# ---------------------------------------------------------------------------
# kilnd's flags, from the real binary.

class Flag:
    def __init__(self, name, type_, check, default, doc):
        self.name, self.type, self.check, self.default, self.doc = name, type_, check, default, doc

    def problem(self, value):
        """Why `value` is no value for this flag, or None."""
        if self.type is None:
            return f"--{self.name} takes no value"
        if self.type == "TEXT":
            if self.check and self.check.startswith("{"):
                allowed = self.check.strip("{}").split(",")
                if value not in allowed:
                    return f"--{self.name}={value}: not one of {allowed}"
            return None
        if "$(" in value:
            return f"--{self.name}={value}: a number cannot come from a variable here"
        if self.type == "INT":
            if not re.fullmatch(r"-?[0-9]+", value):
                return f"--{self.name}={value}: not an integer"
            number = int(value)
        else:
            try:
                number = float(value)
            except ValueError:
                return f"--{self.name}={value}: not a number"
            if not math.isfinite(number):
                return f"--{self.name}={value}: not a finite number"
        if self.check == "POSITIVE" and not number > 0:
            return f"--{self.name}={value}: must be positive"
        m = re.fullmatch(r"(?:INT|FLOAT) in \[(\S+) - (\S+)\]", self.check or "")
        if m and not float(m[1]) <= number <= float(m[2]):
            return f"--{self.name}={value}: outside [{m[1]}, {m[2]}]"
        return None


def parse_help(text):
    """{name: Flag} from CLI11's help: `  --name TYPE[:CHECK][=DEFAULT][ ...]   doc`
    (" ..." for a flag that may be given more than once)."""
    flags = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^\s+(?:-\w,)?--([a-z][a-z0-9-]*)(?: (.*?))?(?:\s{2,}(.*))?$", line)
        if not m:
            continue
        spec, doc = (m[2] or "").strip(), m[3]
        if doc is None and i + 1 < len(lines) and lines[i + 1].startswith(" " * 20):
            doc = lines[i + 1].strip()  # a long spec puts the doc on the next line
        if not spec:
            flags[m[1]] = Flag(m[1], None, None, None, doc or "")
            continue
        s = re.fullmatch(r"(TEXT|INT|FLOAT)(?::(.*?))?(?:=(.*?))?(?: \.\.\.)?", spec)
        assert s, f"kilnd --help: cannot read the spec of --{m[1]}: {spec!r}"
        flags[m[1]] = Flag(m[1], s[1], s[2], s[3], doc or "")
    return flags


@lru_cache(maxsize=1)
def kilnd_flags():
    kilnd = BIN_DIR / "kilnd"
    assert kilnd.exists(), f"{kilnd} missing: build kiln (or set KILN_BIN_DIR)"
    r = subprocess.run([str(kilnd), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r
    return parse_help(r.stdout)


@lru_cache(maxsize=1)
def contract_shape():
    """{field: (min, max, default)} for vcpu and memoryMiB, from src/common/contract.h."""
    text = (REPO / "src" / "common" / "contract.h").read_text()
    out = {}
    for field, const in (("vcpu", "kVcpu"), ("memoryMiB", "kMemoryMiB")):
        m = re.search(const + r"\{(\d+), (\d+), (\d+)\}", text)
        assert m, f"contract.h: no {const}"
        out[field] = tuple(int(x) for x in m.groups())
    return out


# ---------------------------------------------------------------------------
# The manifests.

class Deploy:
    def __init__(self, root):
        self.root = Path(root)
        self.files = {}
        self.load_problems = []
        for path in sorted(self.root.glob("*.yaml")):
            try:
                self.files[path.name] = [d for d in yaml.load_all(path.read_text(), Loader=LOADER) if d is not None]
            except yaml.YAMLError as e:
                self.load_problems.append(f"{path.name}: not YAML: {e}")

    def objects(self):
        for name, docs in self.files.items():
            for doc in docs:
                if isinstance(doc, dict) and doc.get("kind") != "Kustomization":
                    yield name, doc

    def find(self, kind, name=None):
        for file, doc in self.objects():
            if doc.get("kind") == kind and (name is None or doc.get("metadata", {}).get("name") == name):
                return file, doc
        return None, None

    def kilnd(self):
        """(file, DaemonSet, pod spec, kilnd container) or Nones."""
        file, ds = self.find("DaemonSet", "kilnd")
        if not ds:
            return None, None, None, None
        pod = ds.get("spec", {}).get("template", {}).get("spec", {})
        for c in pod.get("containers", []):
            if c.get("name") == "kilnd":
                return file, ds, pod, c
        return file, ds, pod, None

    def ray_worker_group(self):
        """(file, RayCluster, the worker group that declares kiln_sandbox) or Nones."""
        file, rc = self.find("RayCluster")
        if not rc:
            return None, None, None
        for g in rc.get("spec", {}).get("workerGroupSpecs", []) or []:
            if SANDBOX_RESOURCE in str(g.get("rayStartParams", {}).get("resources", "")):
                return file, rc, g
        return file, rc, None


def flag_values(container):
    """(list of (name, value-or-None), problems) from a container's args."""
    out, problems = [], []
    args = list(container.get("args", []))
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not isinstance(a, str):
            problems.append(f"args: {a!r} is a {type(a).__name__}, not a string (Kubernetes args are strings)")
            continue
        if not a.startswith("--"):
            problems.append(f"args: {a!r} is no --flag")
            continue
        name, eq, value = a[2:].partition("=")
        if not eq:
            value = None
            if i < len(args) and isinstance(args[i], str) and not args[i].startswith("--"):
                value = args[i]
                i += 1
        out.append((name, value))
    return out, problems


def effective(container):
    """{flag: value} kilnd will run with: the manifest's values over --help's defaults."""
    values = {name: f.default for name, f in kilnd_flags().items() if f.default is not None}
    values.update({n: v for n, v in flag_values(container)[0] if v is not None})
    return values


def env_of(container):
    return {e.get("name"): e for e in container.get("env", []) or []}


def mount_volume(pod, container, path):
    """The (mount, volume) under which `path` lies in `container`, deepest mount first."""
    volumes = {v.get("name"): v for v in pod.get("volumes", []) or []}
    best = None
    for m in container.get("volumeMounts", []) or []:
        mp = m.get("mountPath", "").rstrip("/")
        if path == mp or path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[0].get("mountPath", "")):
                best = (m, volumes.get(m.get("name")))
    return best or (None, None)


def resolve_port(container, port):
    """A probe's or Service's port (number or name) as the container's number."""
    if isinstance(port, int):
        return port
    for p in container.get("ports", []) or []:
        if p.get("name") == port:
            return p.get("containerPort")
    return None


def node_ip_var(container, var):
    """True if $(var) is the node's address from the downward API."""
    e = env_of(container).get(var)
    path = (e or {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    return path in ("status.hostIP", "status.podIP")


def parse_ray_resources(value):
    """rayStartParams.resources: a JSON object inside a quoted string with \\" escapes."""
    if not isinstance(value, str):
        raise ValueError(f"is a {type(value).__name__}, not a string")
    s = value.strip()
    if len(s) < 2 or s[0] != '"' or s[-1] != '"':
        raise ValueError(f"{value!r} is not in KubeRay's form '\"{{\\\"name\\\": N}}\"'")
    return json.loads(s[1:-1].replace('\\"', '"'))


def sandbox_capacity(flags, vcpu, memory_mib):
    """kiln_sandbox per node: sandboxes of this shape kilnd admits at once."""
    by_cpu = math.floor(int(flags["host-vcpus"]) * float(flags["cpu-overcommit"]) / vcpu)
    by_memory = math.floor(int(flags["host-memory-mib"]) * float(flags["memory-overcommit"]) / memory_mib)
    return min(by_cpu, by_memory, int(flags["key-sandbox-limit"]))


# ---------------------------------------------------------------------------
# Checks. Each takes a Deploy and returns a list of problems.

def check_parse(d):
    problems = list(d.load_problems)
    for name, docs in d.files.items():
        for doc in docs:
            if not isinstance(doc, dict):
                problems.append(f"{name}: a document is a {type(doc).__name__}, not a mapping")
    if not d.files:
        problems.append(f"{d.root}: no *.yaml files")
    return problems


def check_kinds(d):
    problems = []
    for name, docs in d.files.items():
        for doc in docs:
            if not isinstance(doc, dict):
                continue
            pair = (doc.get("apiVersion"), doc.get("kind"))
            if pair not in SERVED:
                problems.append(f"{name}: apiVersion {pair[0]!r} kind {pair[1]!r} is not served by current "
                                "Kubernetes/KubeRay")
            if pair[1] == "Kustomization":
                if name != "kustomization.yaml":
                    problems.append(f"{name}: a Kustomization belongs in kustomization.yaml")
                continue
            meta = doc.get("metadata", {}) or {}
            if not DNS_LABEL.fullmatch(str(meta.get("name", ""))):
                problems.append(f"{name}: {pair[1]} metadata.name {meta.get('name')!r} is no DNS label")
            want = None if pair[1] in CLUSTER_SCOPED else NAMESPACE
            if meta.get("namespace") != want:
                problems.append(f"{name}: {pair[1]} {meta.get('name')}: metadata.namespace is "
                                f"{meta.get('namespace')!r}, want {want!r}")
    return problems


def check_flags(d):
    file, ds, pod, c = d.kilnd()
    if not c:
        return ["no DaemonSet kilnd with a container kilnd"]
    known = kilnd_flags()
    values, problems = flag_values(c)
    problems = [f"{file}: {p}" for p in problems]
    env = env_of(c)
    seen = set()
    for name, value in values:
        where = f"{file}: container kilnd: --{name}"
        if name in seen:
            problems.append(f"{where}: given twice")
        seen.add(name)
        flag = known.get(name)
        if flag is None:
            problems.append(f"{where}: not a kilnd flag (kilnd --help)")
            continue
        if name in ("help", "version") or flag.doc.startswith("tests only"):
            problems.append(f"{where}: not for a running daemon ({flag.doc or 'exits at once'})")
            continue
        if value is None:
            if flag.type is not None:
                problems.append(f"{where}: needs a value")
            continue
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value):
            if var not in env:
                problems.append(f"{where}: $({var}) is not in the container's env")
        if (why := flag.problem(value)):
            problems.append(f"{where}: {why}")
    if not (c.get("command") or [None])[0]:
        problems.append(f"{file}: container kilnd: no command")
    return problems


def check_ports(d):
    file, ds, pod, c = d.kilnd()
    if not c:
        return ["no DaemonSet kilnd with a container kilnd"]
    problems = []
    listen = effective(c).get("listen", "")
    host, _, port_text = listen.rpartition(":")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return [f"{file}: --listen={listen}: no port"]
    port = int(port_text)
    var = re.fullmatch(r"\$\((\w+)\)", host)
    if host in ("127.0.0.1", "localhost", "[::1]", ""):
        problems.append(f"{file}: --listen={listen}: loopback is out of reach of probes and other pods")
    elif var and not node_ip_var(c, var[1]):
        problems.append(f"{file}: --listen={listen}: $({var[1]}) is not the node's address (status.hostIP)")
    ports = c.get("ports", []) or []
    if not any(p.get("containerPort") == port for p in ports):
        problems.append(f"{file}: container kilnd: containerPort {[p.get('containerPort') for p in ports]} "
                        f"is not --listen's port {port}")
    for p in ports:
        if p.get("hostPort") not in (None, p.get("containerPort")):
            problems.append(f"{file}: hostPort {p.get('hostPort')} differs from containerPort")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = (c.get(probe) or {}).get("httpGet")
        if not get:
            problems.append(f"{file}: container kilnd: no {probe}.httpGet")
            continue
        if resolve_port(c, get.get("port")) != port:
            problems.append(f"{file}: {probe} port {get.get('port')!r} is not --listen's port {port}")
        if get.get("path") != HEALTH:
            problems.append(f"{file}: {probe} path {get.get('path')!r} is not kilnd's health route {HEALTH}")
    sfile, svc = d.find("Service", "kilnd")
    if not svc:
        problems.append("no Service kilnd")
    else:
        spec = svc.get("spec", {})
        targets = [resolve_port(c, p.get("targetPort", p.get("port"))) for p in spec.get("ports", [])]
        if port not in targets:
            problems.append(f"{sfile}: Service kilnd targetPort {targets} is not --listen's port {port}")
        if spec.get("internalTrafficPolicy") != "Local":
            problems.append(f"{sfile}: Service kilnd must be node-local (internalTrafficPolicy: Local): a "
                            "sandbox lives in one node's kilnd")
    # Ray workers reach their node's kilnd at the node's address.
    rfile, rc, group = d.ray_worker_group()
    if group:
        for w in group.get("template", {}).get("spec", {}).get("containers", []):
            url = env_of(w).get("KILN_API_URL", {}).get("value", "")
            m = re.fullmatch(r"http://\$\((\w+)\):(\d+)", url)
            if not m:
                problems.append(f"{rfile}: container {w.get('name')}: KILN_API_URL {url!r} is not "
                                "http://$(NODE_IP_VAR):PORT")
                continue
            if not node_ip_var(w, m[1]):
                problems.append(f"{rfile}: container {w.get('name')}: $({m[1]}) is not status.hostIP")
            if int(m[2]) != port:
                problems.append(f"{rfile}: container {w.get('name')}: KILN_API_URL port {m[2]} is not "
                                f"--listen's port {port}")
        if not pod.get("hostNetwork") and not any(p.get("hostPort") == port for p in ports):
            problems.append(f"{file}: neither hostNetwork nor hostPort {port}: the node's address does not "
                            "reach kilnd")
    return problems


def check_volumes(d):
    file, ds, pod, c = d.kilnd()
    if not c:
        return ["no DaemonSet kilnd with a container kilnd"]
    problems = []
    pods = [(file, "DaemonSet kilnd", pod)]
    rfile, rc, group = d.ray_worker_group()
    if group:
        pods.append((rfile, "RayCluster worker group", group.get("template", {}).get("spec", {})))
    for f, what, spec in pods:
        names = {v.get("name") for v in spec.get("volumes", []) or []}
        for cont in (spec.get("containers", []) or []) + (spec.get("initContainers", []) or []):
            for m in cont.get("volumeMounts", []) or []:
                if m.get("name") not in names:
                    problems.append(f"{f}: {what}: container {cont.get('name')} mounts volume "
                                    f"{m.get('name')!r}, which the pod does not have")
    flags = effective(c)
    state_dir = flags.get("state-dir", "")
    mount, volume = mount_volume(pod, c, state_dir)
    if not mount or mount.get("mountPath", "").rstrip("/") != state_dir.rstrip("/"):
        problems.append(f"{file}: --state-dir={state_dir} is no volumeMount's mountPath")
    elif not (volume or {}).get("hostPath") or mount.get("readOnly"):
        problems.append(f"{file}: --state-dir={state_dir}: its volume must be a writable hostPath")
    for name in ("image-dir", "admin-key-file"):
        if name in flags:
            m, v = mount_volume(pod, c, flags[name])
            if not (v or {}).get("hostPath"):
                problems.append(f"{file}: --{name}={flags[name]} is on no hostPath volume")
    m, v = mount_volume(pod, c, "/sys/fs/cgroup")
    if not m or m.get("mountPath") != "/sys/fs/cgroup" or (v or {}).get("hostPath", {}).get("path") != "/sys/fs/cgroup":
        problems.append(f"{file}: no mount of the node's /sys/fs/cgroup at /sys/fs/cgroup (kilnd makes "
                        "/sys/fs/cgroup/<controller>/kiln/<id>)")
    if not (c.get("securityContext") or {}).get("privileged"):
        problems.append(f"{file}: container kilnd is not privileged (runsc needs it)")
    if not pod.get("hostPID"):
        problems.append(f"{file}: no hostPID: sandboxes would die with kilnd's PID namespace")
    # --prices names a file from a ConfigMap of this deploy.
    if "prices" in flags:
        path = flags["prices"]
        m, v = mount_volume(pod, c, path)
        cm_name = (v or {}).get("configMap", {}).get("name")
        key = path[len(m.get("mountPath", "").rstrip("/")) + 1:] if m else ""
        cfile, cm = d.find("ConfigMap", cm_name) if cm_name else (None, None)
        if not cm or key not in (cm.get("data") or {}):
            problems.append(f"{file}: --prices={path} is no key of a mounted ConfigMap of this deploy")
        else:
            try:
                prices = json.loads(cm["data"][key])
            except ValueError as e:
                problems.append(f"{cfile}: {key} is not JSON: {e}")
            else:
                if not isinstance(prices, dict) or set(prices) - PRICE_KEYS:
                    problems.append(f"{cfile}: {key}: keys must be among {sorted(PRICE_KEYS)}")
                elif any(type(x) is not int or x < 0 for x in prices.values()):
                    problems.append(f"{cfile}: {key}: prices are whole non-negative micros")
                elif prices.get("cpuFloorMillis", 0) > 1000:
                    problems.append(f"{cfile}: {key}: cpuFloorMillis must be within [0, 1000]")
    # The Ray worker's copy of the admin key is the node's <state-dir>/admin.key.
    if group:
        key_in_pod = flags.get("admin-key-file", state_dir.rstrip("/") + "/admin.key")
        st_mount, st_volume = mount_volume(pod, c, key_in_pod)
        host_state = (st_volume or {}).get("hostPath", {}).get("path", "")
        want = host_state.rstrip("/") + key_in_pod[len(st_mount.get("mountPath", "").rstrip("/")):] if st_mount else None
        got = [v.get("hostPath", {}).get("path") for v in group["template"]["spec"].get("volumes", [])
               if v.get("hostPath")]
        if want not in got:
            problems.append(f"{rfile}: worker group: no hostPath volume of the node's admin key {want} "
                            f"(has {got})")
        for w in group["template"]["spec"].get("containers", []):
            key_file = env_of(w).get("KILN_ADMIN_KEY_FILE", {}).get("value")
            if key_file and not mount_volume(group["template"]["spec"], w, key_file)[0]:
                problems.append(f"{rfile}: container {w.get('name')}: KILN_ADMIN_KEY_FILE {key_file} is on no mount")
    return problems


def check_selectors(d):
    file, ds, pod, c = d.kilnd()
    if not ds:
        return ["no DaemonSet kilnd"]
    problems = []
    labels = ds.get("spec", {}).get("template", {}).get("metadata", {}).get("labels", {}) or {}
    match = ds.get("spec", {}).get("selector", {}).get("matchLabels", {}) or {}
    if not match or any(labels.get(k) != v for k, v in match.items()):
        problems.append(f"{file}: DaemonSet selector {match} does not select its pod labels {labels}")
    sfile, svc = d.find("Service", "kilnd")
    if svc:
        sel = svc.get("spec", {}).get("selector", {}) or {}
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            problems.append(f"{sfile}: Service selector {sel} does not select kilnd's pods {labels}")
    rfile, rc, group = d.ray_worker_group()
    if group:
        gspec = group.get("template", {}).get("spec", {})
        if gspec.get("nodeSelector") != pod.get("nodeSelector"):
            problems.append(f"{rfile}: worker nodeSelector {gspec.get('nodeSelector')} is not kilnd's "
                            f"{pod.get('nodeSelector')}: workers must run where a kilnd runs")
        if gspec.get("tolerations") != pod.get("tolerations"):
            problems.append(f"{rfile}: worker tolerations differ from kilnd's")
        terms = gspec.get("affinity", {}).get("podAntiAffinity", {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution", []) or []
        want = {"ray.io/cluster": rc["metadata"]["name"], "ray.io/group": group.get("groupName")}
        if not any(t.get("topologyKey") == "kubernetes.io/hostname" and
                   t.get("labelSelector", {}).get("matchLabels") == want for t in terms):
            problems.append(f"{rfile}: worker group lacks one-per-node anti-affinity on {want}: two workers "
                            "on a node would each claim the node's whole kiln_sandbox count")
    return problems


def check_ray_resource(d):
    file, ds, pod, c = d.kilnd()
    rfile, rc, group = d.ray_worker_group()
    if not rc:
        return ["no RayCluster"]
    if not group:
        return [f"{rfile}: no worker group declares {SANDBOX_RESOURCE} in rayStartParams.resources"]
    if not c:
        return ["no DaemonSet kilnd with a container kilnd"]
    where = f"{rfile}: worker group {group.get('groupName')}: rayStartParams.resources"
    try:
        resources = parse_ray_resources(group["rayStartParams"]["resources"])
    except (ValueError, KeyError) as e:
        return [f"{where}: {e}"]
    count = resources.get(SANDBOX_RESOURCE)
    if type(count) is not int or count <= 0:
        return [f"{where}: {SANDBOX_RESOURCE} is {count!r}, not a positive integer"]
    given = dict(n_v for n_v in flag_values(c)[0])
    missing = [f"--{n}" for n in ("host-vcpus", "host-memory-mib") if given.get(n) is None]
    if missing:
        return [f"{file}: {', '.join(missing)} not set: {SANDBOX_RESOURCE} cannot be derived from kilnd's flags"]
    notes = group.get("template", {}).get("metadata", {}).get("annotations", {}) or {}
    shape = {}
    for field, note in (("vcpu", "kiln.dev/sandbox-vcpu"), ("memoryMiB", "kiln.dev/sandbox-memory-mib")):
        lo, hi, _ = contract_shape()[field]
        v = str(notes.get(note, ""))
        if not v.isdigit() or not lo <= int(v) <= hi:
            return [f"{rfile}: annotation {note}={v!r}: not a {field} kiln accepts [{lo}, {hi}]"]
        shape[field] = int(v)
    try:
        want = sandbox_capacity(effective(c), shape["vcpu"], shape["memoryMiB"])
    except ValueError as e:
        return [f"{file}: kilnd's capacity flags are not numbers: {e}"]
    if count != want:
        return [f"{where}: {SANDBOX_RESOURCE}={count}, but kilnd's flags admit {want} sandboxes of "
                f"{shape['vcpu']} vCPU, {shape['memoryMiB']} MiB"]
    return []


def check_kustomization(d):
    docs = d.files.get("kustomization.yaml")
    if not docs:
        return ["no kustomization.yaml"]
    k = docs[0]
    listed = k.get("resources", []) or []
    problems = []
    for r in listed:
        if not (d.root / r).is_file():
            problems.append(f"kustomization.yaml: lists {r}, which does not exist")
    if len(set(listed)) != len(listed):
        problems.append("kustomization.yaml: lists a file twice")
    for name in d.files:
        if name != "kustomization.yaml" and name not in listed:
            problems.append(f"kustomization.yaml: does not list {name}")
    if k.get("namespace") != NAMESPACE:
        problems.append(f"kustomization.yaml: namespace {k.get('namespace')!r}, want {NAMESPACE!r}")
    return problems


def check_image(d):
    """The Dockerfile puts kilnd where the DaemonSet runs it, with what kilnd looks for beside it."""
    file, ds, pod, c = d.kilnd()
    path = d.root / "Dockerfile"
    if not path.exists():
        return ["no Dockerfile"]
    if not c:
        return ["no DaemonSet kilnd with a container kilnd"]
    text = path.read_text()
    copies = {}  # file name -> destination directory (or path)
    for m in re.finditer(r"^COPY (?:--from=\S+ )?(.+)$", text, re.M):
        *sources, dest = m[1].split()
        for s in sources:
            copies[s] = dest
    problems = []
    command = (c.get("command") or [""])[0]
    bin_dir = command.rsplit("/", 1)[0] + "/"
    for name in ("kilnd", "kiln-agent"):
        if not any(s.endswith("/" + name) and dest == bin_dir for s, dest in copies.items()):
            problems.append(f"Dockerfile: copies no {name} to {bin_dir} (the DaemonSet runs {command}; "
                            "kilnd looks for kiln-agent beside itself)")
    recipe = str(Path(bin_dir).parent.parent / "images" / "base" / "build.sh")
    if recipe not in copies.values():
        problems.append(f"Dockerfile: no base image recipe at {recipe} (kilnd's default, ../../images/base/build.sh)")
    runsc_dir = str(Path(kilnd_flags()["runsc"].default).parent.parent)
    if not any(dest.rstrip("/") == runsc_dir for dest in copies.values()):
        problems.append(f"Dockerfile: no pinned runsc under {runsc_dir} (kilnd's default --runsc)")
    version = re.search(r"project\(kiln VERSION (\S+)", (REPO / "CMakeLists.txt").read_text())[1]
    if not c.get("image", "").endswith(":" + version):
        problems.append(f"{file}: image {c.get('image')!r} is not tagged with kiln's version {version}")
    return problems


CHECKS = {f.__name__[len("check_"):]: f for f in (
    check_parse, check_kinds, check_flags, check_ports, check_volumes, check_selectors,
    check_ray_resource, check_kustomization, check_image)}


# ---------------------------------------------------------------------------
# Tests.

@pytest.mark.parametrize("check", CHECKS)
def test_the_manifests_pass(check):
    problems = CHECKS[check](Deploy(DEPLOY))
    assert problems == [], "\n".join(problems)


def test_the_help_parser_reads_every_flag_kilnd_defines():
    defined = set(re.findall(r'add_(?:option|flag)\("--([a-z-]+)"',
                             (REPO / "src" / "daemon" / "flags.cc").read_text()))
    flags = kilnd_flags()
    assert defined and defined <= set(flags), defined - set(flags)
    assert flags["listen"].default == "127.0.0.1:7070" and flags["state-dir"].default == "/var/lib/kiln"
    assert flags["pool-size"].type == "INT" and flags["memory-overcommit"].check == "POSITIVE"
    assert flags["platform"].problem("kvm") and not flags["platform"].problem("systrap")
    assert flags["version"].type is None and flags["test-resolver-file"].doc.startswith("tests only")


def test_probes_use_the_route_kilnd_serves_without_a_key():
    assert f'r.Add("GET", "{HEALTH}"' in (REPO / "src" / "api" / "kiln" / "routes_sandboxes.cc").read_text()
    assert f'p == "{HEALTH}"' in (REPO / "src" / "api" / "front.cc").read_text()  # Unauthenticated()


def test_the_documented_count_is_the_one_in_the_manifests():
    """The manual's worked example of the rule names the same figures as the manifests."""
    _, _, _, c = Deploy(DEPLOY).kilnd()
    flags = effective(c)
    shape = contract_shape()
    count = sandbox_capacity(flags, shape["vcpu"][2], shape["memoryMiB"][2])
    guide = (REPO / "docs" / "guide.md").read_text()
    section = guide[guide.index("\n## Kubernetes\n") + 1:]
    assert f"= {count}" in section[:section.index("\n## ")], count


# A copy of deploy/kubernetes with one thing wrong, and what the checks must say.
def _docs(fn):
    """A mutation of one YAML file's documents."""
    return ("yaml", fn)


def _text(fn):
    return ("text", fn)


def _ds(docs):
    return next(d for d in docs if d["kind"] == "DaemonSet")


def _kilnd(docs):
    return _ds(docs)["spec"]["template"]["spec"]["containers"][0]


def _set_arg(docs, name, value):
    args = _kilnd(docs)["args"]
    args[:] = [a for a in args if not a.startswith(f"--{name}=")] + ([f"--{name}={value}"] if value else [])


def _group(docs):
    return docs[0]["spec"]["workerGroupSpecs"][0]


def _set_count(docs, value):
    _group(docs)["rayStartParams"]["resources"] = '"' + json.dumps({SANDBOX_RESOURCE: value}).replace('"', '\\"') + '"'


MUTATIONS = {
    "bad yaml": ("service.yaml", _text(lambda t: t + "\n  - : [\n"), "parse", "service.yaml: not YAML"),
    "old apiVersion": ("daemonset.yaml", _docs(lambda ds: ds[0].update(apiVersion="apps/v1beta2")),
                       "kinds", "'apps/v1beta2'"),
    "old ray apiVersion": ("raycluster.yaml", _docs(lambda rc: rc[0].update(apiVersion="ray.io/v1alpha1")),
                           "kinds", "'ray.io/v1alpha1'"),
    "wrong namespace": ("service.yaml", _docs(lambda s: s[0]["metadata"].update(namespace="default")),
                        "kinds", "metadata.namespace is 'default'"),
    "unknown flag": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "pool-sizes", "2")),
                     "flags", "--pool-sizes: not a kilnd flag"),
    "word for an int": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "host-vcpus", "lots")),
                        "flags", "--host-vcpus=lots: not an integer"),
    "int out of range": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "max-connections", "5")),
                         "flags", "--max-connections=5: outside [16, 1048576]"),
    "negative factor": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "memory-overcommit", "-1")),
                        "flags", "--memory-overcommit=-1: must be positive"),
    "no such platform": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "platform", "kvm")),
                         "flags", "--platform=kvm: not one of"),
    "tests-only flag": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "test-resolver-file", "/x")),
                        "flags", "--test-resolver-file: not for a running daemon"),
    "int in yaml": ("daemonset.yaml", _docs(lambda ds: _kilnd(ds)["args"].extend(["--pool-size", 3])),
                    "flags", "args: 3 is a int, not a string"),
    "undefined variable": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "listen", "$(NODE):7070")),
                           "flags", "$(NODE) is not in the container's env"),
    "container port": ("daemonset.yaml", _docs(lambda ds: _kilnd(ds)["ports"][0].update(containerPort=7071)),
                       "ports", "containerPort [7071] is not --listen's port 7070"),
    "listen port": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "listen", "$(KILN_NODE_IP):7071")),
                    "ports", "is not --listen's port 7071"),
    "loopback listen": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "listen", None)),
                        "ports", "--listen=127.0.0.1:7070: loopback"),
    "service port": ("service.yaml", _docs(lambda s: s[0]["spec"]["ports"][0].update(targetPort=8080)),
                     "ports", "targetPort [8080] is not --listen's port 7070"),
    "probe port": ("daemonset.yaml", _docs(lambda ds: _kilnd(ds)["livenessProbe"]["httpGet"].update(port=7071)),
                   "ports", "livenessProbe port 7071"),
    "probe path": ("daemonset.yaml", _docs(lambda ds: _kilnd(ds)["readinessProbe"]["httpGet"].update(path="/healthz")),
                   "ports", "readinessProbe path '/healthz'"),
    "cluster-wide service": ("service.yaml", _docs(lambda s: s[0]["spec"].pop("internalTrafficPolicy")),
                             "ports", "must be node-local"),
    "ray url port": ("raycluster.yaml", _docs(lambda rc: _group(rc)["template"]["spec"]["containers"][0]["env"][1]
                                              .update(value="http://$(KILN_NODE_IP):7071")),
                     "ports", "KILN_API_URL port 7071"),
    "no host network": ("daemonset.yaml", _docs(lambda ds: _ds(ds)["spec"]["template"]["spec"].pop("hostNetwork")),
                        "ports", "neither hostNetwork nor hostPort"),
    "state dir": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "state-dir", "/var/lib/kiln2")),
                  "volumes", "--state-dir=/var/lib/kiln2 is no volumeMount's mountPath"),
    "mount without volume": ("daemonset.yaml", _docs(lambda ds: _ds(ds)["spec"]["template"]["spec"]["volumes"].pop(1)),
                             "volumes", "mounts volume 'cgroup', which the pod does not have"),
    "not privileged": ("daemonset.yaml", _docs(lambda ds: _kilnd(ds).pop("securityContext")),
                       "volumes", "is not privileged"),
    "no hostPID": ("daemonset.yaml", _docs(lambda ds: _ds(ds)["spec"]["template"]["spec"].pop("hostPID")),
                   "volumes", "no hostPID"),
    "prices key": ("configmap.yaml", _docs(lambda cm: cm[0]["data"].update({"prices.json": '{"vcpuHour": 1}'})),
                   "volumes", "keys must be among"),
    "admin key path": ("raycluster.yaml", _docs(lambda rc: _group(rc)["template"]["spec"]["volumes"][0]["hostPath"]
                                                .update(path="/var/lib/kiln/admin.token")),
                       "volumes", "no hostPath volume of the node's admin key /var/lib/kiln/admin.key"),
    "service selector": ("service.yaml", _docs(lambda s: s[0]["spec"].update(selector={"app": "kilnd"})),
                         "selectors", "Service selector {'app': 'kilnd'}"),
    "daemonset selector": ("daemonset.yaml", _docs(lambda ds: _ds(ds)["spec"]["selector"]["matchLabels"]
                                                   .update({"app.kubernetes.io/name": "kiln"})),
                           "selectors", "DaemonSet selector"),
    "worker elsewhere": ("raycluster.yaml", _docs(lambda rc: _group(rc)["template"]["spec"].pop("nodeSelector")),
                         "selectors", "worker nodeSelector None"),
    "two workers a node": ("raycluster.yaml", _docs(lambda rc: _group(rc)["template"]["spec"].pop("affinity")),
                           "selectors", "one-per-node anti-affinity"),
    "resource name": ("raycluster.yaml", _docs(lambda rc: _group(rc)["rayStartParams"].update(
                          resources='"{\\"kiln_sandboxes\\": 48}"')),
                      "ray_resource", "kiln_sandbox is None"),
    "wrong count": ("raycluster.yaml", _docs(lambda rc: _set_count(rc, 49)),
                    "ray_resource", "kiln_sandbox=49, but kilnd's flags admit 48"),
    "zero count": ("raycluster.yaml", _docs(lambda rc: _set_count(rc, 0)),
                   "ray_resource", "kiln_sandbox is 0, not a positive integer"),
    "string count": ("raycluster.yaml", _docs(lambda rc: _set_count(rc, "48")),
                     "ray_resource", "kiln_sandbox is '48', not a positive integer"),
    "unquoted resources": ("raycluster.yaml", _docs(lambda rc: _group(rc)["rayStartParams"].update(
                               resources='{"kiln_sandbox": 48}')),
                           "ray_resource", "not in KubeRay's form"),
    "flags changed, count not": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "cpu-overcommit", "4")),
                                 "ray_resource", "kilnd's flags admit 24"),
    "default overcommit": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "cpu-overcommit", None)),
                           "ray_resource", "kiln_sandbox=48, but kilnd's flags admit 100"),
    "host vcpus unset": ("daemonset.yaml", _docs(lambda ds: _set_arg(ds, "host-vcpus", None)),
                         "ray_resource", "--host-vcpus not set"),
    "shape out of range": ("raycluster.yaml", _docs(lambda rc: _group(rc)["template"]["metadata"]["annotations"]
                                                    .update({"kiln.dev/sandbox-vcpu": "32"})),
                           "ray_resource", "kiln.dev/sandbox-vcpu='32'"),
    "unlisted file": ("extra.yaml", _text(lambda t: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n"
                                          "  name: extra\n  namespace: kiln-system\n"),
                      "kustomization", "does not list extra.yaml"),
    "listed missing file": ("kustomization.yaml", _docs(lambda k: k[0]["resources"].append("secret.yaml")),
                            "kustomization", "lists secret.yaml, which does not exist"),
    "agent not beside kilnd": ("Dockerfile", _text(lambda t: t.replace(" /src/build/bin/kiln-agent", "")),
                               "image", "copies no kiln-agent"),
    "image tag": ("daemonset.yaml", _docs(lambda ds: _kilnd(ds).update(image="kiln/kilnd:latest")),
                  "image", "is not tagged with kiln's version"),
}


@pytest.mark.parametrize("mutation", MUTATIONS)
def test_a_broken_copy_is_caught(mutation, tmp_path):
    file, (how, fn), check, expected = MUTATIONS[mutation]
    root = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, root)
    path = root / file
    if how == "text":
        path.write_text(fn(path.read_text() if path.exists() else ""))
    else:
        docs = list(yaml.load_all(path.read_text(), Loader=LOADER))
        fn(docs)
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    d = Deploy(root)
    problems = CHECKS[check](d)
    assert any(expected in p for p in problems), (expected, problems)
    # Only the broken part is reported: the rest of the copy still passes
    # (a YAML dump of the copy keeps every value).
    others = {n: CHECKS[n](d) for n in CHECKS if n != check}
    assert all(not p for n, p in others.items() if n not in RIPPLES.get(mutation, ())), others


# Mutations that also, rightly, upset another check.
RIPPLES = {
    "bad yaml": ("ports",),  # no Service left to check
    "word for an int": ("ray_resource",),
    "negative factor": ("ray_resource",),
    "undefined variable": ("ports",),
}
