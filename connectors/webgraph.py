"""Web graphs for crawl simulation: edge-list and LAW/WebGraph BVGraph readers, and PageRank.

A graph is held in compressed sparse rows (`WebGraph`), so a simulated crawler can fetch any
page's out-links in O(1). PageRank is one power-iteration core used both for a whole graph and
for the partially known graph a crawl has discovered so far.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import re
import tempfile
import time
import zipfile
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt

from frontierflow.state.pagerank import check_node_ids, pagerank_subgraph

logger = logging.getLogger(__name__)

IntArray = npt.NDArray[np.int64]
NodeArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]
PathLike = str | os.PathLike[str]

_INT32_MAX = int(np.iinfo(np.int32).max)
_GZIP_MAGIC = b"\x1f\x8b"
_COMMENT_LINE = re.compile(rb"(?m)^[ \t]*#[^\n]*(?:\n|\Z)")
_PROPERTY_LINE = re.compile(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$")

#: Graphs shipped with the package, by name, and the basename of their files.
BUNDLED_GRAPHS: dict[str, str] = {"uk-2007-05@100000": "uk-2007-05-100000"}
_BUNDLED_PACKAGE = "frontierflow.connectors.graphs"


class GraphFormatError(ValueError):
    """A graph file is missing, malformed, truncated, or uses an unsupported feature."""


# --------------------------------------------------------------------------------------------
# The in-memory graph
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class WebGraph:
    """A directed graph in CSR form: node x's successors are successors[offsets[x]:offsets[x+1]]."""

    offsets: IntArray
    successors: NodeArray

    def __post_init__(self) -> None:
        offsets = np.ascontiguousarray(self.offsets, dtype=np.int64)
        successors = np.asarray(self.successors)
        if offsets.ndim != 1 or offsets.size == 0 or successors.ndim != 1:
            raise ValueError("offsets must be 1-D of length n+1 and successors 1-D")
        num_nodes = offsets.size - 1
        if offsets[0] != 0 or offsets[-1] != successors.size or np.any(np.diff(offsets) < 0):
            raise ValueError("offsets must start at 0, never decrease and end at len(successors)")
        if successors.size and (successors.min() < 0 or successors.max() >= num_nodes):
            raise ValueError(f"successors must be node ids in [0, {num_nodes})")
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "successors", np.ascontiguousarray(successors, dtype=np.int32))

    @classmethod
    def from_arcs(
        cls, sources: npt.ArrayLike, targets: npt.ArrayLike, num_nodes: int | None = None
    ) -> WebGraph:
        """Builds the CSR of an arc list, keeping each node's arcs in their given order."""
        src = np.asarray(sources, dtype=np.int64)
        dst = np.asarray(targets, dtype=np.int64)
        if src.ndim != 1 or src.shape != dst.shape:
            raise ValueError("sources and targets must be 1-D arrays of the same length")
        if num_nodes is None:
            num_nodes = int(max(src.max(), dst.max())) + 1 if src.size else 0
        check_node_ids(src, num_nodes, "sources")
        if src.size > 1 and np.any(src[1:] < src[:-1]):
            order = np.argsort(src, kind="stable")
            src, dst = src[order], dst[order]
        offsets = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=num_nodes), out=offsets[1:])
        return cls(offsets, dst.astype(np.int32))

    @property
    def num_nodes(self) -> int:
        """The number of nodes, ids 0..num_nodes-1."""
        return int(self.offsets.size - 1)

    @property
    def num_arcs(self) -> int:
        """The number of arcs."""
        return int(self.successors.size)

    def successors_of(self, node: int) -> NodeArray:
        """The successors of `node`, as a view into `successors`."""
        return self.successors[self.offsets[node] : self.offsets[node + 1]]

    def outdegree(self, node: int) -> int:
        """The number of arcs leaving `node`."""
        return int(self.offsets[node + 1] - self.offsets[node])

    def outdegrees(self) -> IntArray:
        """The outdegree of every node."""
        return np.diff(self.offsets)

    def indegrees(self) -> IntArray:
        """The indegree of every node."""
        return np.bincount(self.successors, minlength=self.num_nodes).astype(np.int64)

    def sources(self) -> NodeArray:
        """The source of every arc, aligned with `successors`."""
        nodes = np.arange(self.num_nodes, dtype=np.int32)
        return np.repeat(nodes, self.outdegrees())


def read_edge_list(path: PathLike) -> WebGraph:
    """Reads `src dst` lines (whitespace separated, `#` comments, optionally gzipped).

    The node count is the largest id plus one; each node keeps its arcs in file order.
    """
    raw = _read_file(Path(path))
    if raw.startswith(_GZIP_MAGIC) or str(path).endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise GraphFormatError(f"{path}: not a valid gzip file: {exc}") from exc
    data = _COMMENT_LINE.sub(b"", raw) if b"#" in raw else raw
    values = _parse_integers(data, path)
    if values.size != 2 * _count_lines(data):
        _raise_on_bad_line(raw, path)
    if values.size and (values.min() < 0 or values.max() > _INT32_MAX):
        raise GraphFormatError(f"{path}: node ids must be in [0, {_INT32_MAX}]")
    pairs = values.reshape(-1, 2)
    return WebGraph.from_arcs(pairs[:, 0], pairs[:, 1])


def _read_file(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise GraphFormatError(f"cannot read graph file {path}: {exc}") from exc


def _parse_integers(data: bytes, path: PathLike) -> IntArray:
    try:
        return np.fromstring(data, dtype=np.int64, sep=" ")
    except ValueError as exc:
        raise GraphFormatError(f"{path}: not a list of integer pairs ({exc})") from exc


def _count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _raise_on_bad_line(raw: bytes, path: PathLike) -> None:
    """Slow path, taken only when tokens and lines disagree: blank lines are fine, others not."""
    for number, line in enumerate(raw.splitlines(), start=1):
        fields = line.split()
        if fields and not fields[0].startswith(b"#") and len(fields) != 2:
            raise GraphFormatError(f"{path}:{number}: expected 2 fields, found {len(fields)}")


# --------------------------------------------------------------------------------------------
# BVGraph: parameters
# --------------------------------------------------------------------------------------------

_DEFAULT_CODES: dict[str, str] = {
    "OUTDEGREES": "GAMMA",
    "REFERENCES": "UNARY",
    "BLOCKS": "GAMMA",
    "BLOCK_COUNT": "GAMMA",
    "INTERVALS": "GAMMA",
    "RESIDUALS": "ZETA",
    "OFFSETS": "GAMMA",
}
_SUPPORTED_CODES = frozenset({"GAMMA", "DELTA", "UNARY", "ZETA", "NIBBLE"})


@dataclass(frozen=True)
class BVGraphParams:
    """The parameters of a BVGraph that decoding needs, from its `.properties` file."""

    nodes: int
    arcs: int
    window_size: int
    min_interval_length: int
    zeta_k: int
    codes: dict[str, str]


def parse_compression_flags(flags: str) -> dict[str, str]:
    """Maps each component (OUTDEGREES, RESIDUALS, ...) to its code name, defaults included."""
    codes = dict(_DEFAULT_CODES)
    for raw_flag in flags.split("|"):
        flag = raw_flag.strip()
        if not flag:
            continue
        component = next((c for c in codes if flag.startswith(c + "_")), None)
        if component is None:
            raise GraphFormatError(f"unknown BVGraph compression flag {flag!r}")
        code = flag[len(component) + 1 :]
        if code not in _SUPPORTED_CODES and component != "OFFSETS":
            raise GraphFormatError(
                f"unsupported BVGraph compression flag {flag!r}: {code} codes are not supported "
                f"(supported: {', '.join(sorted(_SUPPORTED_CODES))})"
            )
        codes[component] = code
    return codes


def _parse_properties(text: str) -> dict[str, str]:
    properties: dict[str, str] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        match = _PROPERTY_LINE.match(stripped)
        if match:
            properties[match.group(1)] = match.group(2).strip()
        else:
            properties[stripped] = ""
    return properties


def _int_property(properties: dict[str, str], key: str, default: int | None = None) -> int:
    value = properties.get(key)
    if value is None:
        if default is None:
            raise GraphFormatError(f"BVGraph properties lack the required key {key!r}")
        return default
    try:
        number = int(value)
    except ValueError as exc:
        raise GraphFormatError(f"BVGraph property {key}={value!r} is not an integer") from exc
    if number < 0:
        raise GraphFormatError(f"BVGraph property {key}={number} is negative")
    return number


def bvgraph_params(properties_text: str) -> BVGraphParams:
    """Validates the text of a `.properties` file and extracts what decoding needs."""
    properties = _parse_properties(properties_text)
    graph_class = properties.get("graphclass", "")
    if graph_class and not graph_class.endswith(".BVGraph"):
        raise GraphFormatError(f"unsupported graph class {graph_class!r} (only BVGraph)")
    if _int_property(properties, "version") != 0:
        raise GraphFormatError(f"unsupported BVGraph version {properties['version']!r}")
    params = BVGraphParams(
        nodes=_int_property(properties, "nodes"),
        arcs=_int_property(properties, "arcs"),
        window_size=_int_property(properties, "windowsize"),
        min_interval_length=_int_property(properties, "minintervallength"),
        zeta_k=_int_property(properties, "zetak", 3),
        codes=parse_compression_flags(properties.get("compressionflags", "")),
    )
    if params.nodes > _INT32_MAX + 1 or params.zeta_k < 1:
        raise GraphFormatError(f"unsupported BVGraph parameters: {params}")
    return params


# --------------------------------------------------------------------------------------------
# BVGraph: bit stream
# --------------------------------------------------------------------------------------------

_MAX_CODE_BITS = 64


class _BitReader:
    """An MSB-first bit stream over a string of '0'/'1' characters (C-speed find and int)."""

    __slots__ = ("bits", "pos", "size", "zeta_k")

    def __init__(self, data: bytes, zeta_k: int) -> None:
        self.size = 8 * len(data)
        self.bits = format(int.from_bytes(data, "big"), f"0{self.size}b") if data else ""
        self.pos = 0
        self.zeta_k = zeta_k

    def decoder(self, code: str) -> Callable[[], int]:
        """The method reading one natural number in the named code."""
        readers: dict[str, Callable[[], int]] = {
            "GAMMA": self.gamma,
            "DELTA": self.delta,
            "UNARY": self.unary,
            "ZETA": self.zeta,
            "NIBBLE": self.nibble,
        }
        return readers[code]

    def _truncated(self) -> GraphFormatError:
        return GraphFormatError(f"bit stream truncated (needed bits past bit {self.size})")

    def _leading_zeros(self) -> tuple[int, int]:
        """Returns (number of 0s before the next 1, position of that 1)."""
        one = self.bits.find("1", self.pos)
        if one < 0:
            raise self._truncated()
        return one - self.pos, one

    def _binary(self, start: int, width: int) -> int:
        end = start + width
        if end > self.size:
            raise self._truncated()
        self.pos = end
        return int(self.bits[start:end], 2) if width else 0

    def unary(self) -> int:
        zeros, one = self._leading_zeros()
        self.pos = one + 1
        return zeros

    def gamma(self) -> int:
        zeros, one = self._leading_zeros()
        if zeros >= _MAX_CODE_BITS:
            raise GraphFormatError(f"gamma code at bit {self.pos} is too long")
        return self._binary(one, zeros + 1) - 1  # the leading 1 is the implicit top bit

    def delta(self) -> int:
        width = self.gamma()
        if width >= _MAX_CODE_BITS:
            raise GraphFormatError(f"delta code at bit {self.pos} is too long")
        return ((1 << width) | self._binary(self.pos, width)) - 1

    def zeta(self) -> int:
        k = self.zeta_k
        h = self.unary()
        if h * k >= _MAX_CODE_BITS:
            raise GraphFormatError(f"zeta code at bit {self.pos} is too long")
        left = 1 << (h * k)
        m = self._binary(self.pos, h * k + k - 1)
        if m < left:
            return m + left - 1
        return ((m << 1) | self._binary(self.pos, 1)) - 1

    def nibble(self) -> int:
        value = 0
        last = 0
        while not last:
            if value >> _MAX_CODE_BITS:
                raise GraphFormatError(f"nibble code at bit {self.pos} is too long")
            chunk = self._binary(self.pos, 4)
            last = chunk >> 3
            value = (value << 3) | (chunk & 7)
        return value


def _nat2int(value: int) -> int:
    """Inverse of int2nat: 0, 1, 2, 3, 4... -> 0, -1, 1, -2, 2..."""
    return (value >> 1) ^ -(value & 1)


# --------------------------------------------------------------------------------------------
# BVGraph: successor lists
# --------------------------------------------------------------------------------------------


class _NodeDecoder:
    """Decodes successor lists one node after the other, keeping the reference window."""

    def __init__(self, params: BVGraphParams, reader: _BitReader) -> None:
        codes = params.codes
        self.params = params
        self.reader = reader
        self.read_outdegree = reader.decoder(codes["OUTDEGREES"])
        self.read_reference = reader.decoder(codes["REFERENCES"])
        self.read_block_count = reader.decoder(codes["BLOCK_COUNT"])
        self.read_block = reader.decoder(codes["BLOCKS"])
        self.read_interval = reader.decoder(codes["INTERVALS"])
        self.read_residual = reader.decoder(codes["RESIDUALS"])
        self.cycle = params.window_size + 1
        self.window: list[list[int]] = [[] for _ in range(self.cycle)]

    def decode(self, x: int) -> list[int]:
        """Reads node `x`'s list (all earlier nodes must have been decoded in order)."""
        outdegree = self.read_outdegree()
        if outdegree > self.params.nodes:
            raise GraphFormatError(f"outdegree {outdegree} exceeds the number of nodes")
        successors: list[int] = []
        if outdegree:
            successors = self._successors(x, outdegree)
        self.window[x % self.cycle] = successors
        return successors

    def _successors(self, x: int, outdegree: int) -> list[int]:
        copied = self._copied(x) if self.params.window_size else []
        extra = outdegree - len(copied)
        if extra < 0:
            raise GraphFormatError(f"copied {len(copied)} arcs, more than the outdegree")
        if not extra:
            return copied
        intervals: list[int] = []
        if self.params.min_interval_length:
            intervals = self._intervals(x, extra)
            extra -= len(intervals)
        successors = copied + intervals + self._residuals(x, extra)
        successors.sort()
        if successors[0] < 0 or successors[-1] >= self.params.nodes:
            raise GraphFormatError(f"successor out of range [0, {self.params.nodes})")
        return successors

    def _copied(self, x: int) -> list[int]:
        reference = self.read_reference()
        if not reference:
            return []
        if reference > self.params.window_size or reference > x:
            raise GraphFormatError(f"reference {reference} is outside the window")
        referenced = self.window[(x - reference) % self.cycle]
        block_count = self.read_block_count()
        if not block_count:
            return referenced
        if block_count > len(referenced) + 1:
            raise GraphFormatError(f"{block_count} copy blocks for a list of {len(referenced)}")
        return self._copy_blocks(referenced, block_count)

    def _copy_blocks(self, referenced: list[int], block_count: int) -> list[int]:
        copied: list[int] = []
        start = 0
        read_block = self.read_block
        for index in range(block_count):
            end = start + read_block() + (1 if index else 0)
            if not index & 1:
                copied += referenced[start:end]
            start = end
        if start > len(referenced):
            raise GraphFormatError("copy blocks run past the end of the referenced list")
        if not block_count & 1:
            copied += referenced[start:]
        return copied

    def _intervals(self, x: int, extra: int) -> list[int]:
        read = self.read_interval
        count = read()
        if count > extra:
            raise GraphFormatError(f"{count} intervals for {extra} extra successors")
        values: list[int] = []
        right = 0  # one past the previous interval
        for index in range(count):
            left = x + _nat2int(read()) if index == 0 else right + read() + 1
            length = read() + self.params.min_interval_length
            if len(values) + length > extra:
                raise GraphFormatError("intervals hold more successors than the outdegree")
            right = left + length
            values.extend(range(left, right))
        return values

    def _residuals(self, x: int, count: int) -> list[int]:
        if count <= 0:
            return []
        read = self.read_residual
        value = x + _nat2int(read())
        values = [value]
        append = values.append
        for _ in range(count - 1):
            value += read() + 1
            append(value)
        return values


def decode_bvgraph(data: bytes, params: BVGraphParams) -> WebGraph:
    """Decodes a whole `.graph` bit stream sequentially (no offsets file needed)."""
    reader = _BitReader(data, params.zeta_k)
    decoder = _NodeDecoder(params, reader)
    successors = array("i")
    degrees = array("q")
    node = 0
    try:
        for node in range(params.nodes):
            row = decoder.decode(node)
            degrees.append(len(row))
            successors.extend(row)
    except GraphFormatError as exc:
        raise GraphFormatError(f"corrupt BVGraph at node {node}, bit {reader.pos}: {exc}") from exc
    if len(successors) != params.arcs:
        raise GraphFormatError(
            f"corrupt BVGraph: decoded {len(successors)} arcs, properties say {params.arcs}"
        )
    offsets = np.zeros(params.nodes + 1, dtype=np.int64)
    np.cumsum(np.frombuffer(degrees, dtype=np.int64), out=offsets[1:])
    graph = WebGraph(offsets, np.frombuffer(successors, dtype=np.int32).copy())
    _check_sorted_rows(graph)
    return graph


def _check_sorted_rows(graph: WebGraph) -> None:
    """Successor lists of a valid BVGraph are strictly increasing."""
    rising = np.diff(graph.successors.astype(np.int64)) > 0
    row_start = np.zeros(graph.num_arcs, dtype=bool)
    row_start[graph.offsets[:-1][graph.outdegrees() > 0]] = True
    if not np.all(rising | row_start[1:]):
        raise GraphFormatError("corrupt BVGraph: a successor list is not strictly increasing")


# --------------------------------------------------------------------------------------------
# BVGraph: files and cache
# --------------------------------------------------------------------------------------------


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
    graph_bytes = _read_file(Path(f"{base}.graph"))
    properties = _read_file(Path(f"{base}.properties")).decode("latin-1")
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


def pagerank(
    graph: WebGraph, damping: float = 0.85, tol: float = 1e-10, max_iter: int = 200
) -> FloatArray:
    """PageRank of every node (sums to 1), uniform teleport, dangling mass spread uniformly."""
    return pagerank_subgraph(
        graph.sources(), graph.successors, graph.num_nodes, damping, tol, max_iter
    )
