"""Tests of the web graph readers (edge lists, BVGraph) and of PageRank.

The BVGraph decoder is checked against the LAW edge list of the shipped graph, and against a
small independent BVGraph encoder written here from the format's description.
"""

from __future__ import annotations

import gzip
import itertools
from pathlib import Path

import numpy as np
import pytest

from frontierflow.connectors import bvgraph, graphfiles, webgraph
from frontierflow.connectors.graphfiles import read_bvgraph, read_graph
from frontierflow.connectors.webgraph import GraphFormatError, WebGraph, pagerank, read_edge_list
from frontierflow.state.pagerank import pagerank_subgraph

SHARED_GRAPH_DIR = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "webgraph" / "uk-2007-05-100000"
)
BUNDLED_NAME = "uk-2007-05@100000"


def csr(lists: list[list[int]]) -> WebGraph:
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(row) for row in lists])
    successors = np.array([y for row in lists for y in row], dtype=np.int32)
    return WebGraph(offsets, successors)


def assert_same_graph(actual: WebGraph, expected: WebGraph) -> None:
    assert actual.offsets.dtype == np.int64 and actual.successors.dtype == np.int32
    np.testing.assert_array_equal(actual.offsets, expected.offsets)
    np.testing.assert_array_equal(actual.successors, expected.successors)


# --------------------------------------------------------------------------------------------
# A BVGraph encoder, independent of the decoder, for round trips
# --------------------------------------------------------------------------------------------


def int2nat(value: int) -> int:
    return 2 * value if value >= 0 else -2 * value - 1


class BitWriter:
    """Writes instantaneous codes MSB first, as WebGraph's OutputBitStream does."""

    def __init__(self, zeta_k: int) -> None:
        self.parts: list[str] = []
        self.zeta_k = zeta_k

    def write(self, code: str, value: int) -> None:
        assert value >= 0
        getattr(self, code.lower())(value)

    def binary(self, value: int, width: int) -> None:
        if width:
            self.parts.append(format(value, f"0{width}b"))

    def unary(self, value: int) -> None:
        self.parts.append("0" * value + "1")

    def gamma(self, value: int) -> None:
        width = (value + 1).bit_length() - 1
        self.unary(width)
        self.binary(value + 1 - (1 << width), width)

    def delta(self, value: int) -> None:
        width = (value + 1).bit_length() - 1
        self.gamma(width)
        self.binary(value + 1 - (1 << width), width)

    def zeta(self, value: int) -> None:
        k, plus = self.zeta_k, value + 1
        h = (plus.bit_length() - 1) // k
        self.unary(h)
        left = 1 << (h * k)
        if plus - left < left:
            self.binary(plus - left, h * k + k - 1)
        else:
            self.binary(plus, h * k + k)

    def nibble(self, value: int) -> None:
        groups = max(1, -(-value.bit_length() // 3))
        for index in reversed(range(groups)):
            self.binary(8 * (index == 0) | (value >> (3 * index)) & 7, 4)

    def to_bytes(self) -> bytes:
        bits = "".join(self.parts)
        bits += "0" * (-len(bits) % 8)
        return int(bits, 2).to_bytes(len(bits) // 8, "big") if bits else b""


DEFAULT_CODES = {
    "OUTDEGREES": "GAMMA",
    "REFERENCES": "UNARY",
    "BLOCKS": "GAMMA",
    "BLOCK_COUNT": "GAMMA",
    "INTERVALS": "GAMMA",
    "RESIDUALS": "ZETA",
}


def copy_blocks(reference: list[int], successors: set[int]) -> list[int]:
    """Copy/skip run lengths over the reference list, the implicit last run dropped."""
    runs, copying, length = [], True, 0
    for node in reference:
        if (node in successors) == copying:
            length += 1
        else:
            runs.append(length)
            copying, length = not copying, 1
    runs.append(length)
    return runs[:-1]


def split_intervals(extras: list[int], min_length: int) -> tuple[list[tuple[int, int]], list[int]]:
    intervals, residuals, start = [], [], 0
    while start < len(extras):
        end = start + 1
        while end < len(extras) and extras[end] == extras[end - 1] + 1:
            end += 1
        if min_length and end - start >= min_length:
            intervals.append((extras[start], end - start))
        else:
            residuals.extend(extras[start:end])
        start = end
    return intervals, residuals


def choose_reference(lists: list[list[int]], x: int, window: int, policy: str) -> int:
    if policy == "previous":
        return 1 if window and x else 0
    present = set(lists[x])
    overlaps = [(len(present.intersection(lists[x - r])), -r) for r in range(1, min(window, x) + 1)]
    best = max(overlaps, default=(0, 0))
    return -best[1] if best[0] else 0


def encode_node(out: BitWriter, lists: list[list[int]], x: int, settings: dict) -> None:
    codes, window, min_length = settings["codes"], settings["window"], settings["min_interval"]
    successors = lists[x]
    out.write(codes["OUTDEGREES"], len(successors))
    if not successors:
        return
    extras = successors
    if window:
        ref = choose_reference(lists, x, window, settings["policy"])
        out.write(codes["REFERENCES"], ref)
        if ref:
            blocks = copy_blocks(lists[x - ref], set(successors))
            out.write(codes["BLOCK_COUNT"], len(blocks))
            for index, block in enumerate(blocks):
                out.write(codes["BLOCKS"], block - (1 if index else 0))
            copied = {y for y in lists[x - ref] if y in set(successors)}
            extras = [y for y in successors if y not in copied]
    if not extras:
        return
    intervals, residuals = split_intervals(extras, min_length)
    if min_length:
        out.write(codes["INTERVALS"], len(intervals))
        right = 0
        for index, (left, length) in enumerate(intervals):
            out.write(codes["INTERVALS"], int2nat(left - x) if index == 0 else left - right - 1)
            out.write(codes["INTERVALS"], length - min_length)
            right = left + length
    if residuals:
        out.write(codes["RESIDUALS"], int2nat(residuals[0] - x))
        for previous, current in itertools.pairwise(residuals):
            out.write(codes["RESIDUALS"], current - previous - 1)


def write_bvgraph(basename: Path, lists: list[list[int]], **overrides: object) -> None:
    settings: dict = {
        "window": 7,
        "min_interval": 4,
        "zeta_k": 3,
        "policy": "best",
        "codes": DEFAULT_CODES,
    }
    settings.update(overrides)
    out = BitWriter(settings["zeta_k"])
    for x in range(len(lists)):
        encode_node(out, lists, x, settings)
    flags = "|".join(
        f"{component}_{code}"
        for component, code in settings["codes"].items()
        if code != DEFAULT_CODES[component]
    )
    basename.with_name(basename.name + ".graph").write_bytes(out.to_bytes())
    basename.with_name(basename.name + ".properties").write_text(
        "#BVGraph properties\n"
        "graphclass=it.unimi.dsi.webgraph.BVGraph\nversion=0\n"
        f"nodes={len(lists)}\narcs={sum(map(len, lists))}\n"
        f"windowsize={settings['window']}\nminintervallength={settings['min_interval']}\n"
        f"zetak={settings['zeta_k']}\nmaxrefcount=3\ncompressionflags={flags}\n"
    )


def local_random_graph(seed: int, num_nodes: int) -> list[list[int]]:
    """Successor lists with web-like locality: copies of neighbours' lists, runs and far links."""
    rng = np.random.default_rng(seed)
    lists: list[list[int]] = []
    for x in range(num_nodes):
        chosen: set[int] = set()
        if lists and rng.random() < 0.6:
            source = lists[int(rng.integers(max(0, x - 8), x))]
            chosen.update(y for y in source if rng.random() < 0.8)
        if rng.random() < 0.4:
            start = int(rng.integers(0, num_nodes))
            chosen.update(range(start, min(num_nodes, start + int(rng.integers(1, 12)))))
        chosen.update(int(y) for y in rng.integers(0, num_nodes, size=int(rng.integers(0, 6))))
        if rng.random() < 0.15:
            chosen.clear()
        lists.append(sorted(chosen))
    return lists


HAND_GRAPHS = {
    "empty": [[], [], []],
    "self_loops_and_backlinks": [[0], [0, 1], [0, 1, 2], [], [0, 2, 4]],
    "intervals": [
        [1, 2, 3, 4, 5, 9],
        [1, 2, 3, 4, 5, 9, 20, 21, 22, 23, 30],
        [0, 10, 11, 12, 13, 14, 15, 16, 17, 25, 26, 27, 28, 29],
        [],
        [3, 10, 11, 12, 13, 14, 15, 16, 17, 30],
    ]
    + [[] for _ in range(26)],
    "copy_with_skips": [[1, 2, 3, 7, 8], [2, 7], [1, 3, 8], [0, 1, 2, 3, 7, 8], [3]]
    + [[] for _ in range(4)],
}

SETTINGS = {
    "defaults": {},
    "no_window_no_intervals": {"window": 0, "min_interval": 0},
    "always_previous": {"window": 3, "min_interval": 2, "policy": "previous"},
    "zeta1_short_window": {"window": 1, "zeta_k": 1},
    "zeta5": {"zeta_k": 5, "min_interval": 3},
    "other_codes": {
        "codes": {
            "OUTDEGREES": "DELTA",
            "REFERENCES": "GAMMA",
            "BLOCKS": "DELTA",
            "BLOCK_COUNT": "UNARY",
            "INTERVALS": "GAMMA",
            "RESIDUALS": "NIBBLE",
        }
    },
    "gamma_residuals": {"codes": {**DEFAULT_CODES, "RESIDUALS": "GAMMA", "REFERENCES": "DELTA"}},
}


@pytest.mark.parametrize("settings", SETTINGS.values(), ids=SETTINGS.keys())
@pytest.mark.parametrize("graph", HAND_GRAPHS.values(), ids=HAND_GRAPHS.keys())
def test_bvgraph_round_trip_hand_graphs(
    tmp_path: Path, graph: list[list[int]], settings: dict
) -> None:
    write_bvgraph(tmp_path / "g", graph, **settings)
    assert_same_graph(read_bvgraph(tmp_path / "g", cache=False), csr(graph))


@pytest.mark.parametrize("settings", SETTINGS.values(), ids=SETTINGS.keys())
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bvgraph_round_trip_random_graphs(tmp_path: Path, seed: int, settings: dict) -> None:
    graph = local_random_graph(seed, 300)
    write_bvgraph(tmp_path / "g", graph, **settings)
    assert_same_graph(read_bvgraph(tmp_path / "g.graph", cache=False), csr(graph))


def test_encoder_exercises_references_and_intervals() -> None:
    lists = local_random_graph(1, 300)
    refs = [choose_reference(lists, x, 7, "best") for x in range(len(lists))]
    assert sum(r > 0 for r in refs) > 50
    intervals = [split_intervals(row, 4)[0] for row in lists]
    assert sum(len(found) for found in intervals) > 20


def test_encoder_codes_match_known_bit_patterns() -> None:
    # γ(x): x+1 in binary, preceded by one 0 per bit after its leading 1. δ(x): like γ, with the
    # bit count γ-coded. ζ₃(x): h = ⌊log₂(x+1)/3⌋ in unary, then x+1-2^(3h) in minimal binary
    # over [0, 2^(3h+3) - 2^(3h)). Nibble: 3-bit groups, each flagged 1 if it is the last.
    out = BitWriter(3)
    for code, value in [("gamma", 0), ("gamma", 1), ("gamma", 4), ("delta", 1), ("delta", 6)]:
        out.write(code, value)
    assert "".join(out.parts) == "1" + "010" + "00101" + "0100" + "01111"
    out = BitWriter(3)
    for value in (0, 1, 6, 7, 62, 63):
        out.zeta(value)
    assert "".join(out.parts) == "100" + "1010" + "1111" + "0100000" + "01111111" + "00100000000"
    out = BitWriter(3)
    out.nibble(0)
    out.nibble(9)
    assert "".join(out.parts) == "1000" + "0001" + "1001"


def test_bvgraph_read_graph_dispatch(tmp_path: Path) -> None:
    graph = HAND_GRAPHS["copy_with_skips"]
    write_bvgraph(tmp_path / "g", graph)
    for name in ("g", "g.graph", "g.properties"):
        assert_same_graph(read_graph(tmp_path / name, cache=False), csr(graph))


def test_bvgraph_cache_is_used_and_survives_a_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    graph = local_random_graph(4, 100)
    write_bvgraph(tmp_path / "g", graph)
    cache_dir = tmp_path / "cache"
    assert_same_graph(read_bvgraph(tmp_path / "g", cache_dir=cache_dir), csr(graph))
    (cached,) = cache_dir.glob("g-*.npz")
    assert len(cached.stem.split("-")[-1]) == 16

    def no_decoding(*_: object) -> WebGraph:
        raise AssertionError("decoded although the graph is cached")

    with monkeypatch.context() as patch:
        patch.setattr(graphfiles, "decode_bvgraph", no_decoding)
        assert_same_graph(read_bvgraph(tmp_path / "g", cache_dir=cache_dir), csr(graph))
    cached.write_bytes(b"not an npz file")
    assert_same_graph(read_bvgraph(tmp_path / "g", cache_dir=cache_dir), csr(graph))


# --------------------------------------------------------------------------------------------
# BVGraph errors
# --------------------------------------------------------------------------------------------


def test_bvgraph_missing_files_raise(tmp_path: Path) -> None:
    with pytest.raises(GraphFormatError, match="cannot read"):
        read_bvgraph(tmp_path / "absent", cache=False)
    write_bvgraph(tmp_path / "g", HAND_GRAPHS["empty"])
    (tmp_path / "g.properties").unlink()
    with pytest.raises(GraphFormatError, match="properties"):
        read_bvgraph(tmp_path / "g", cache=False)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ("RESIDUALS_GOLOMB", "unsupported BVGraph compression flag"),
        ("RESIDUALS_SKEWED_GOLOMB", "unsupported BVGraph compression flag"),
        ("LABELS_GAMMA", "unknown BVGraph compression flag"),
    ],
)
def test_bvgraph_unsupported_flags_raise(tmp_path: Path, flags: str, message: str) -> None:
    write_bvgraph(tmp_path / "g", HAND_GRAPHS["empty"])
    properties = tmp_path / "g.properties"
    properties.write_text(
        properties.read_text().replace("compressionflags=", f"compressionflags={flags}")
    )
    with pytest.raises(GraphFormatError, match=message):
        read_bvgraph(tmp_path / "g", cache=False)


def test_bvgraph_flags_parse() -> None:
    codes = bvgraph.parse_compression_flags("OUTDEGREES_DELTA | BLOCK_COUNT_UNARY|OFFSETS_DELTA")
    assert codes["OUTDEGREES"] == "DELTA" and codes["BLOCK_COUNT"] == "UNARY"
    assert codes["BLOCKS"] == "GAMMA" and codes["RESIDUALS"] == "ZETA"


def test_bvgraph_other_version_raises(tmp_path: Path) -> None:
    write_bvgraph(tmp_path / "g", HAND_GRAPHS["empty"])
    properties = tmp_path / "g.properties"
    properties.write_text(properties.read_text().replace("version=0", "version=1"))
    with pytest.raises(GraphFormatError, match="version"):
        read_bvgraph(tmp_path / "g", cache=False)


def test_bvgraph_truncated_stream_raises(tmp_path: Path) -> None:
    write_bvgraph(tmp_path / "g", local_random_graph(5, 200))
    graph_file = tmp_path / "g.graph"
    graph_file.write_bytes(graph_file.read_bytes()[: graph_file.stat().st_size // 2])
    with pytest.raises(GraphFormatError, match="truncated"):
        read_bvgraph(tmp_path / "g", cache=False)


@pytest.mark.parametrize("filler", [b"\x00", b"\xff", b"\x5a"])
def test_bvgraph_corrupt_stream_raises(tmp_path: Path, filler: bytes) -> None:
    write_bvgraph(tmp_path / "g", local_random_graph(6, 200))
    graph_file = tmp_path / "g.graph"
    graph_file.write_bytes(filler * graph_file.stat().st_size)
    with pytest.raises(GraphFormatError, match="corrupt BVGraph"):
        read_bvgraph(tmp_path / "g", cache=False)


def test_bvgraph_reference_outside_window_raises(tmp_path: Path) -> None:
    out = BitWriter(3)
    out.gamma(1)  # node 0: outdegree 1
    out.unary(1)  # ...with a reference to node -1
    (tmp_path / "g.graph").write_bytes(out.to_bytes())
    (tmp_path / "g.properties").write_text(
        "version=0\nnodes=1\narcs=1\nwindowsize=7\nminintervallength=4\nzetak=3\n"
    )
    with pytest.raises(GraphFormatError, match="outside the window"):
        read_bvgraph(tmp_path / "g", cache=False)


# --------------------------------------------------------------------------------------------
# The shipped graph
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shipped_graph() -> WebGraph:
    return read_graph(BUNDLED_NAME, cache=False)


def test_shipped_graph_matches_law_edge_list(shipped_graph: WebGraph) -> None:
    edges = SHARED_GRAPH_DIR / "edges.tsv.gz"
    if not edges.exists():
        pytest.skip(f"shared data missing: {edges.name}")
    assert_same_graph(shipped_graph, read_edge_list(edges))


def test_shipped_graph_statistics(shipped_graph: WebGraph) -> None:
    graph = shipped_graph
    assert (graph.num_nodes, graph.num_arcs) == (100_000, 3_050_615)
    assert int(np.sum(graph.sources() == graph.successors)) == 15_670
    assert int(np.sum(graph.outdegrees() == 0)) == 4_973
    assert int(graph.indegrees().max()) == 55_252


def test_shipped_graph_files_equal_shared_copy() -> None:
    shared = SHARED_GRAPH_DIR / "uk-2007-05-100000.graph"
    if not shared.exists():
        pytest.skip(f"shared data missing: {shared.name}")
    bundled = Path(webgraph.__file__).parent / "graphs" / "uk-2007-05-100000.graph"
    assert bundled.read_bytes() == shared.read_bytes()


def test_shipped_graph_truncated_raises(tmp_path: Path) -> None:
    source = Path(webgraph.__file__).parent / "graphs" / "uk-2007-05-100000"
    data = Path(f"{source}.graph").read_bytes()
    (tmp_path / "uk.graph").write_bytes(data[: len(data) // 3])
    (tmp_path / "uk.properties").write_bytes(Path(f"{source}.properties").read_bytes())
    with pytest.raises(GraphFormatError, match="truncated"):
        read_bvgraph(tmp_path / "uk", cache=False)


def test_shipped_graph_pagerank(shipped_graph: WebGraph) -> None:
    rank = pagerank(shipped_graph, tol=1e-8)
    assert rank.shape == (100_000,) and rank.dtype == np.float64
    assert rank.sum() == pytest.approx(1.0) and rank.min() > 0
    assert int(np.argmax(rank)) == int(np.argmax(shipped_graph.indegrees()))


# --------------------------------------------------------------------------------------------
# Edge lists and the CSR
# --------------------------------------------------------------------------------------------


def test_edge_list_plain_with_comments_and_order(tmp_path: Path) -> None:
    path = tmp_path / "edges.tsv"
    path.write_text("# a comment\n2\t0\n0\t3\n  # indented comment\n0 1\n2\t2\n")
    graph = read_edge_list(path)
    assert graph.num_nodes == 4 and graph.num_arcs == 4
    np.testing.assert_array_equal(graph.offsets, [0, 2, 2, 4, 4])
    np.testing.assert_array_equal(graph.successors, [3, 1, 0, 2])  # file order within a node
    np.testing.assert_array_equal(graph.successors_of(2), [0, 2])
    assert graph.outdegree(0) == 2 and graph.outdegree(3) == 0
    np.testing.assert_array_equal(graph.outdegrees(), [2, 0, 2, 0])
    np.testing.assert_array_equal(graph.indegrees(), [1, 1, 1, 1])


@pytest.mark.parametrize("name", ["edges.tsv.gz", "edges.bin"])
def test_edge_list_gzipped(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(gzip.compress(b"0 1\n1 2\n\n2 0"))
    graph = read_edge_list(path)
    np.testing.assert_array_equal(graph.offsets, [0, 1, 2, 3])
    np.testing.assert_array_equal(graph.successors, [1, 2, 0])
    assert_same_graph(read_graph(path), graph)


def test_edge_list_empty(tmp_path: Path) -> None:
    path = tmp_path / "empty.tsv"
    path.write_text("# nothing\n")
    graph = read_edge_list(path)
    assert graph.num_nodes == 0 and graph.num_arcs == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0 1\n1 2 3\n", "expected 2 fields"),
        ("0 1\n1\n", "expected 2 fields"),
        ("0 1\na b\n", "integer pairs"),
        ("0 -1\n", r"\[0, "),
        ("0 4294967296\n", r"\[0, "),
    ],
)
def test_edge_list_malformed_raises(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.tsv"
    path.write_text(text)
    with pytest.raises(GraphFormatError, match=message):
        read_edge_list(path)


def test_edge_list_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(GraphFormatError, match="cannot read"):
        read_edge_list(tmp_path / "absent.tsv")


def test_webgraph_rejects_inconsistent_csr() -> None:
    with pytest.raises(ValueError, match="offsets"):
        WebGraph(np.array([0, 2, 1]), np.array([0], dtype=np.int32))
    with pytest.raises(ValueError, match="node ids"):
        WebGraph(np.array([0, 1]), np.array([1], dtype=np.int32))


# --------------------------------------------------------------------------------------------
# PageRank
# --------------------------------------------------------------------------------------------


def test_pagerank_cycle_is_uniform() -> None:
    rank = pagerank(csr([[1], [2], [0]]))
    np.testing.assert_allclose(rank, [1 / 3, 1 / 3, 1 / 3], atol=1e-12)


def test_pagerank_single_arc_with_dangling_node() -> None:
    # Arc 0 -> 1, node 1 dangling, d = 0.85, n = 2; node 1's mass is spread over both nodes:
    #   r0 = (1-d)/2 + d·r1/2
    #   r1 = (1-d)/2 + d·r1/2 + d·r0,   r0 + r1 = 1
    # so r0 = 0.075 + 0.425·(1 - r0), i.e. 1.425·r0 = 0.5: r0 = 0.5/1.425, r1 = 0.925/1.425.
    rank = pagerank(csr([[1], []]))
    np.testing.assert_allclose(rank, [0.5 / 1.425, 0.925 / 1.425], atol=1e-10)


def test_pagerank_matches_linear_system() -> None:
    lists = [[1, 2], [2], [0, 3], [], [0, 1, 2, 3, 4], []]
    n, d = len(lists), 0.85
    # r = d·(Pᵀ r) + d·(dangling·r)/n·1 + (1-d)/n·1, with P the row-stochastic link matrix.
    matrix = np.zeros((n, n))
    for x, row in enumerate(lists):
        for y in row:
            matrix[y, x] += d / len(row)
        if not row:
            matrix[:, x] += d / n
    expected = np.linalg.solve(np.eye(n) - matrix, np.full(n, (1 - d) / n))
    np.testing.assert_allclose(pagerank(csr(lists)), expected, atol=1e-9)
    assert expected.sum() == pytest.approx(1.0)


def test_pagerank_subgraph_shares_the_core() -> None:
    graph = csr(local_random_graph(7, 150))
    expected = pagerank(graph, damping=0.9)
    rank = pagerank_subgraph(graph.sources(), graph.successors, graph.num_nodes, damping=0.9)
    np.testing.assert_array_equal(rank, expected)


def test_pagerank_subgraph_with_isolated_nodes_and_errors() -> None:
    rank = pagerank_subgraph(np.array([0]), np.array([1]), 4)
    assert rank.sum() == pytest.approx(1.0)
    assert rank[2] == pytest.approx(rank[3]) and rank[1] > rank[0]
    nothing = np.array([], dtype=np.int64)
    assert pagerank_subgraph(nothing, nothing, 0).size == 0
    with pytest.raises(ValueError, match="targets"):
        pagerank_subgraph(np.array([0]), np.array([5]), 2)
    with pytest.raises(ValueError, match="damping"):
        pagerank_subgraph(np.array([0]), np.array([1]), 2, damping=1.0)
