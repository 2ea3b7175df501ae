"""[[cluster]] tables of daemon.toml: the clusters a job's [job] cluster may name, checked like every setting."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Cluster:
    """One cluster the daemon hands jobs to (a Ray head), and where its jobs' run directories live."""

    name: str = field(metadata={"doc": "What [job] cluster and `rlsup submit --cluster` call it."})
    address: str = field(metadata={"doc": "The Ray dashboard's address, e.g. http://head:8265."})
    run_root: str = field(metadata={"doc": "Run directories of its jobs: a filesystem both this machine and "
                                           "the cluster's nodes see at this path."})
    python: str = field(default="python", metadata={"doc": "The Python on the nodes that has rlsup installed."})
    max_jobs: int = field(default=8, metadata={"doc": "Jobs rlsup keeps submitted at once; the rest wait in "
                                                      "rlsup's queue, not in Ray's.", "minimum": 1})


class ClusterError(ValueError):
    """A [[cluster]] table with a missing, unknown or bad key."""


class UnknownCluster(LookupError):
    """A job names a cluster daemon.toml does not."""


def clusters_from_tables(tables: object, *, source: str) -> tuple[Cluster, ...]:
    """The [[cluster]] tables as Clusters; raises ClusterError naming the table and key."""
    if not isinstance(tables, list) or not all(isinstance(table, dict) for table in tables):
        raise ClusterError(f"{source}: cluster: must be an array of tables ([[cluster]])")
    clusters = tuple(_cluster(table, f"{source}: cluster[{index}]") for index, table in enumerate(tables))
    names = [cluster.name for cluster in clusters]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise ClusterError(f"{source}: cluster[{index}].name: {name!r} names two clusters")
    return clusters


def _cluster(table: dict, where: str) -> Cluster:
    known = Cluster.__dataclass_fields__
    for key in table:
        if key not in known:
            raise ClusterError(f"{where}.{key}: unknown key (known: {', '.join(known)})")
    for key in ("name", "address", "run_root"):
        if key not in table:
            raise ClusterError(f"{where}.{key}: missing")
    for key in ("name", "address", "run_root", "python"):
        if key in table and (not isinstance(table[key], str) or not table[key].strip()):
            raise ClusterError(f"{where}.{key}: must be a non-empty string")
    if not Path(table["run_root"]).is_absolute():
        raise ClusterError(f"{where}.run_root: must be an absolute path")
    if table["name"] == "local" or "/" in table["name"]:
        raise ClusterError(f"{where}.name: {table['name']!r} is not a cluster name ('local' is this machine)")
    declared = known["max_jobs"]
    max_jobs, least = table.get("max_jobs", declared.default), declared.metadata["minimum"]
    if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < least:
        raise ClusterError(f"{where}.max_jobs: must be an integer of at least {least}")
    return Cluster(**table)


def cluster_named(clusters: tuple[Cluster, ...], name: str) -> Cluster:
    """The cluster a job names; UnknownCluster says which ones daemon.toml knows."""
    for cluster in clusters:
        if cluster.name == name:
            return cluster
    known = ", ".join(cluster.name for cluster in clusters) or "none"
    raise UnknownCluster(f"no [[cluster]] named {name!r} in daemon.toml (known: {known})")
