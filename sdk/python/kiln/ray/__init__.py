"""kiln.ray: kiln sandboxes placed by Ray across the hosts of a Ray cluster.

Each node that runs a kilnd advertises its room as the custom resource
`kiln_sandbox` (`ray start --resources "$(python3 -m kiln.ray resources)"`)
and gets one agent (`kiln.ray.attach(url)` run on that node, or
`attach(url, node_id=...)` from anywhere). Rollout code in a Ray task or actor
that asks for that resource uses kiln's normal Runtime/Sandbox API on the
node Ray chose:

    @ray.remote(resources={"kiln_sandbox": 1})
    def rollout(snapshot_id):
        with kiln.ray.runtime().sandboxes.create(snapshot=snapshot_id) as sbx:
            return sbx.exec("pytest -q").exit_code

kiln adds no scheduler: placement is Ray's (a task or actor asking for the
resource, or a placement group's bundles for a fork's copies). Ids are
cluster-wide (`<node tag>.<kilnd id>`), so a call on a sandbox from any
process goes to the kilnd that holds it; a snapshot made on one node is
fetched once onto another the first time a create there names it. Ray is
needed only when this module is imported.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import (NodeAffinitySchedulingStrategy,
                                            PlacementGroupSchedulingStrategy)

from .. import config
from ..runtime import Runtime
from . import ids
from .agent import NodeAgent
from .cluster import (NAMESPACE, ClusterRuntime, NodeLostError, RaySandbox, agent, agent_name, owned,
                      runtime_for)

RESOURCE = "kiln_sandbox"

__all__ = ["RESOURCE", "NodeLostError", "ClusterRuntime", "RaySandbox", "attach", "detach", "nodes",
           "runtime", "runtime_for", "sandbox", "node_resources", "map_rollouts", "fork", "owned"]


def _here() -> str:
    return ray.get_runtime_context().get_node_id()


def attach(url: Optional[str] = None, key: Optional[str] = None, *, node_id: Optional[str] = None,
           shared_dir: Optional[str] = None, owner_timeout: Optional[float] = None) -> str:
    """Starts the agent of a node's kilnd (this node by default; url and key as kiln.Runtime
    resolves them); returns the node's tag. Idempotent. `shared_dir`: a directory every node
    mounts, where a snapshot fetched once is kept for the other nodes."""
    node_id = node_id or _here()
    tag = ids.node_tag(node_id)
    url, key = config.resolve(url, key)
    cls = ray.remote(NodeAgent)
    kwargs: Dict[str, Any] = {"shared_dir": shared_dir}
    if owner_timeout is not None:
        kwargs["owner_timeout"] = owner_timeout
    handle = cls.options(name=agent_name(tag), namespace=NAMESPACE, lifetime="detached",
                         get_if_exists=True, num_cpus=0, max_concurrency=32,
                         scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)
                         ).remote(url.rstrip("/"), key, tag, **kwargs)
    ray.get(handle.address.remote())
    return tag


def detach(tag: str) -> None:
    """Stops a node's agent (its kilnd and sandboxes are left alone)."""
    try:
        ray.kill(agent(tag))
    except NodeLostError:
        pass


def nodes() -> List[str]:
    """Tags of the nodes with an attached kilnd (alive or not)."""
    prefix = agent_name("")
    return sorted(a["name"][len(prefix):] for a in ray.util.list_named_actors(all_namespaces=True)
                  if a.get("namespace") == NAMESPACE and a["name"].startswith(prefix))


def runtime(**kwargs: Any) -> ClusterRuntime:
    """The Runtime of this node's kilnd (call it in a task or actor that holds `kiln_sandbox`)."""
    tag = ids.node_tag(_here())
    try:
        return runtime_for(tag)
    except NodeLostError:
        raise NodeLostError(f"no kilnd is attached on this node ({tag}): run rollouts in tasks that ask "
                            f"for the {RESOURCE!r} resource, or call kiln.ray.attach() here",
                            code="node_lost", details={"node": tag}) from None


def sandbox(sandbox_id: str) -> RaySandbox:
    """The sandbox with a cluster-wide id, from any process."""
    tag, _ = ids.split(sandbox_id)
    return runtime_for(tag).sandboxes.get(sandbox_id)  # type: ignore[return-value]


def node_resources(url: Optional[str] = None, key: Optional[str] = None, *,
                   memory_mib: int = 2048) -> Dict[str, int]:
    """`{"kiln_sandbox": n}` for `ray start --resources`: how many sandboxes of `memory_mib`
    the kilnd's memory budget (host memory x overcommit, from its /metrics) holds."""
    rt = Runtime(key, url) if (url or key) else Runtime()
    text = rt.request("GET", "/metrics")
    text = text.decode() if isinstance(text, (bytes, bytearray)) else str(text)
    budget = next((float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith("kiln_capacity_budget_memory_mib ")), None)
    if budget is None:
        raise RuntimeError("kilnd's /metrics has no kiln_capacity_budget_memory_mib (needs an admin key)")
    return {RESOURCE: max(1, int(budget // memory_mib))}


# --- rollouts -------------------------------------------------------------------

_RETRYABLE = tuple(e for e in (getattr(ray.exceptions, n, None) for n in (
    "WorkerCrashedError", "NodeDiedError", "ObjectLostError", "OwnerDiedError", "RayActorError",
    "ActorDiedError", "LocalRayletDiedError", "TaskUnschedulableError")) if e is not None)


def _lost(err: BaseException) -> bool:
    """A failure that came from losing a node, not from the rollout's own code."""
    if isinstance(err, _RETRYABLE) or isinstance(err, NodeLostError):
        return True
    cause = getattr(err, "cause", None)
    return isinstance(cause, (NodeLostError,) + _RETRYABLE)


@ray.remote(max_retries=0)
def _episode(fn: Callable[[ClusterRuntime, Any], Any], item: Any) -> Any:
    rt = runtime()
    made: List[RaySandbox] = []
    original = rt._sandbox

    def track(info: Dict[str, Any]) -> RaySandbox:
        sbx = original(info)
        made.append(sbx)  # type: ignore[arg-type]
        return sbx  # type: ignore[return-value]

    rt._sandbox = track  # type: ignore[method-assign]
    try:
        return fn(rt, item)
    finally:
        rt._sandbox = original  # type: ignore[method-assign]
        for sbx in made:
            if sbx.state != "stopped":
                try:
                    sbx.stop(wait=False)
                except Exception:  # noqa: BLE001 -- the episode's own result or error wins
                    pass


class RolloutResults(list):  # type: ignore[type-arg]
    """The results in the items' order; `attempts[i]` is how many tries item i took,
    `nodes[i]` the tag of the node whose try succeeded and `lost[i]` why the earlier tries
    failed (one line each)."""

    attempts: List[int]
    nodes: List[str]
    lost: List[List[str]]


@ray.remote(max_retries=0)
def _where() -> str:
    return ids.node_tag(ray.get_runtime_context().get_node_id())


def map_rollouts(fn: Callable[[ClusterRuntime, Any], Any], items: Iterable[Any], *, retries: int = 2,
                 sandboxes_per_item: float = 1, **ray_options: Any) -> RolloutResults:
    """Runs `fn(runtime, item)` for every item as a Ray task holding `sandboxes_per_item` of
    `kiln_sandbox`, on the node Ray picks; `runtime` is that node's. Sandboxes an episode made
    are stopped when it ends. An episode whose node was lost (NodeLostError, a crashed worker or
    raylet) is run again elsewhere up to `retries` times; any other error is raised."""
    items = list(items)
    opts = dict(ray_options)
    opts["resources"] = {**opts.get("resources", {}), RESOURCE: sandboxes_per_item}
    opts.setdefault("num_cpus", 0)
    task = _episode.options(**opts)

    def wrapped(rt: ClusterRuntime, item: Any) -> Any:
        return rt.tag, fn(rt, item)

    pending = {task.remote(wrapped, item): i for i, item in enumerate(items)}
    results: List[Any] = [None] * len(items)
    where: List[str] = [""] * len(items)
    attempts = [1] * len(items)
    lost: List[List[str]] = [[] for _ in items]
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        ref = done[0]
        i = pending.pop(ref)
        try:
            where[i], results[i] = ray.get(ref)
        except Exception as e:  # noqa: BLE001 -- sorted below
            if not _lost(e) or attempts[i] > retries:
                for other in pending:
                    ray.cancel(other, force=True)
                raise
            attempts[i] += 1
            lost[i].append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
            pending[task.remote(wrapped, items[i])] = i
    out = RolloutResults(results)
    out.attempts, out.nodes, out.lost = attempts, where, lost
    return out


@ray.remote(max_retries=0)
def _restore(snapshot_id: str, fields: Dict[str, Any]) -> Dict[str, Any]:
    rt = runtime().untracked()
    sbx = rt.sandboxes.create(snapshot=snapshot_id, **fields)
    return {"id": sbx.id}


def fork(source: RaySandbox, count: int, *, pg: Any = None, strategy: str = "SPREAD",
         keep_snapshot: bool = False, **fields: Any) -> List[RaySandbox]:
    """`count` copies of a running sandbox, placed by Ray: copy i goes to bundle i of the
    placement group `pg` (each bundle must hold `kiln_sandbox`), or, without one, to a
    placement group of `count` one-sandbox bundles with `strategy` made for the fork and removed
    once the copies run. A copy on another node restores from the source's snapshot fetched
    there. The copies are kept alive by the calling process."""
    snap = source.snapshot(retention_days=1)
    made_pg = pg is None
    if made_pg:
        pg = placement_group([{RESOURCE: 1}] * count, strategy=strategy)
        ray.get(pg.ready())
    try:
        refs = [_restore.options(num_cpus=0, resources={RESOURCE: 1},
                                 scheduling_strategy=PlacementGroupSchedulingStrategy(
                                     pg, placement_group_bundle_index=i)).remote(snap["id"], fields)
                for i in range(count)]
        copies = [sandbox(r["id"]).adopt() for r in ray.get(refs)]
    finally:
        if made_pg:
            remove_placement_group(pg)
        if not keep_snapshot:
            _delete_everywhere(snap["localId"])
    return copies


def _delete_everywhere(local_snapshot_id: str) -> None:
    for tag in nodes():
        try:
            runtime_for(tag).request("POST", f"/v1/snapshots/{local_snapshot_id}:delete", json={})
        except Exception:  # noqa: BLE001 -- absent there, or the node is gone
            pass


def _main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m kiln.ray")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("resources", help="print {'kiln_sandbox': n} for `ray start --resources`")
    r.add_argument("--url")
    r.add_argument("--key")
    r.add_argument("--memory-mib", type=int, default=2048)
    a = sub.add_parser("attach", help="start this node's agent (after `ray start`)")
    a.add_argument("--url")
    a.add_argument("--key")
    a.add_argument("--address", default="auto", help="the Ray cluster (default: auto)")
    a.add_argument("--shared-dir")
    args = ap.parse_args(argv)
    if args.cmd == "resources":
        print(json.dumps(node_resources(args.url, args.key, memory_mib=args.memory_mib)))
        return 0
    ray.init(address=args.address, namespace=NAMESPACE, log_to_driver=False)
    print(attach(args.url, args.key, shared_dir=args.shared_dir))
    return 0

