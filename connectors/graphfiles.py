"""Graph files by name: a graph bundled with the package, a BVGraph on disk, or an edge list.

`read_graph` picks the reader a name or path calls for. A decoded BVGraph is cached as `.npz`
keyed by the graph file's SHA-256, since decoding the bundled graph takes seconds.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import time
import zipfile
from importlib import resources
from pathlib import Path

import numpy as np

from frontierflow.connectors.bvgraph import BVGraphParams, bvgraph_params, decode_bvgraph
from frontierflow.connectors.webgraph import (
    GraphFormatError,
    PathLike,
    WebGraph,
    read_edge_list,
    read_graph_file,
)

logger = logging.getLogger(__name__)

#: Graphs shipped with the package, by name, and the basename of their files.
BUNDLED_GRAPHS: dict[str, str] = {"uk-2007-05@100000": "uk-2007-05-100000"}
_BUNDLED_PACKAGE = "frontierflow.connectors.graphs"


def default_cache_dir() -> Path:
    """Where decoded graphs are cached: ~/.cache/frontierflow/graphs."""
    return Path.home() / ".cache" / "frontierflow" / "graphs"


def read_bvgraph(
    basename: PathLike, *, cache: bool = True, cache_dir: PathLike | None = None
) -> WebGraph:
    """Reads `basename.graph` with `basename.properties` (a `.graph`/`.properties` suffix is ok).

    The decoded CSR is cached as `.npz`, keyed by the graph file's SHA-256, when `cache` is true.
    """
    base = _strip_bvgraph_suffix(Path(basename))
    graph_bytes = read_graph_file(Path(f"{base}.graph"))
    properties = read_graph_file(Path(f"{base}.properties")).decode("latin-1")
    return _load_bvgraph(base.name, graph_bytes, properties, cache, cache_dir)


def _strip_bvgraph_suffix(path: Path) -> Path:
    return path.with_suffix("") if path.suffix in (".graph", ".properties") else path


def _load_bvgraph(
    name: str, data: bytes, properties: str, cache: bool, cache_dir: PathLike | None
) -> WebGraph:
    params = bvgraph_params(properties)
    cache_file = None
    if cache:
        digest = hashlib.sha256(data).hexdigest()[:16]
        cache_file = Path(cache_dir or default_cache_dir()) / f"{name}-{digest}.npz"
        cached = _load_cached(cache_file, params)
        if cached is not None:
            return cached
    started = time.perf_counter()
    graph = decode_bvgraph(data, params)
    logger.info(
        "decoded BVGraph %s: %d nodes, %d arcs in %.1f s",
        name,
        graph.num_nodes,
        graph.num_arcs,
        time.perf_counter() - started,
    )
    if cache_file is not None:
        _store_cached(cache_file, graph)
    return graph


def _load_cached(cache_file: Path, params: BVGraphParams) -> WebGraph | None:
    if not cache_file.exists():
        return None
    try:
        with np.load(cache_file) as stored:
            graph = WebGraph(stored["offsets"], stored["successors"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
        logger.warning("ignoring unreadable graph cache %s: %s", cache_file, exc)
        return None
    if (graph.num_nodes, graph.num_arcs) != (params.nodes, params.arcs):
        logger.warning("ignoring graph cache %s: it does not match the properties", cache_file)
        return None
    logger.debug("loaded cached graph %s", cache_file)
    return graph


def _store_cached(cache_file: Path, graph: WebGraph) -> None:
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(
            dir=cache_file.parent, suffix=".tmp", delete=False
        ) as handle:
            np.savez(handle, offsets=graph.offsets, successors=graph.successors)
        os.replace(handle.name, cache_file)
    except OSError as exc:
        logger.warning("could not cache decoded graph in %s: %s", cache_file, exc)


def bundled_graph(name: str, *, cache: bool = True, cache_dir: PathLike | None = None) -> WebGraph:
    """Loads a graph shipped in `frontierflow.connectors.graphs` by name (see BUNDLED_GRAPHS)."""
    if name not in BUNDLED_GRAPHS:
        raise GraphFormatError(f"no bundled graph {name!r}; known: {sorted(BUNDLED_GRAPHS)}")
    stem = BUNDLED_GRAPHS[name]
    folder = resources.files(_BUNDLED_PACKAGE)
    try:
        data = (folder / f"{stem}.graph").read_bytes()
        properties = (folder / f"{stem}.properties").read_bytes().decode("latin-1")
    except OSError as exc:
        raise GraphFormatError(f"bundled graph {name!r} is missing its files: {exc}") from exc
    return _load_bvgraph(stem, data, properties, cache, cache_dir)


def read_graph(
    path: PathLike, *, cache: bool = True, cache_dir: PathLike | None = None
) -> WebGraph:
    """Reads a bundled graph by name, a BVGraph (.graph/.properties/basename) or an edge list."""
    text = os.fspath(path)
    if text in BUNDLED_GRAPHS:
        return bundled_graph(text, cache=cache, cache_dir=cache_dir)
    if text.endswith((".graph", ".properties")) or Path(f"{text}.properties").exists():
        return read_bvgraph(text, cache=cache, cache_dir=cache_dir)
    return read_edge_list(text)
