"""Cluster-wide ids. A sandbox or snapshot made through kiln.ray is named
`<node tag>.<kilnd id>`: the tag (the first 16 hex digits of the Ray node id)
says which node's kilnd holds it, so any process can route a call to it."""

from __future__ import annotations

from typing import Tuple

SEP = "."
TAG_LEN = 16


def node_tag(node_id: str) -> str:
    """The tag of a Ray node id (56 hex digits)."""
    tag = node_id[:TAG_LEN].lower()
    if len(tag) != TAG_LEN or any(c not in "0123456789abcdef" for c in tag):
        raise ValueError(f"not a Ray node id: {node_id!r}")
    return tag


def compose(tag: str, local_id: str) -> str:
    return f"{tag}{SEP}{local_id}"


def split(cluster_id: str) -> Tuple[str, str]:
    """(tag, kilnd id) of a cluster-wide id; ValueError naming the id if it has no tag."""
    tag, sep, local = cluster_id.partition(SEP)
    if not sep or not local or len(tag) != TAG_LEN or any(c not in "0123456789abcdef" for c in tag):
        raise ValueError(f"{cluster_id!r} is not a kiln.ray id (<node tag>.<id>); "
                         "ids from a plain Runtime name no node")
    return tag, local
