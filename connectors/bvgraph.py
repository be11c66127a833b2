"""The LAW/WebGraph BVGraph format (Boldi & Vigna, WWW 2004), decoded into a `WebGraph`.

`bvgraph_params` validates a `.properties` file; `decode_bvgraph` reads a `.graph` bit stream
sequentially (instantaneous codes, reference window, copy blocks, intervals, residuals) into
compressed sparse rows. Reading files, the bundled graph and the decode cache are in `graphfiles`.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from frontierflow.connectors.webgraph import MAX_NODE_ID, GraphFormatError, WebGraph

_PROPERTY_LINE = re.compile(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$")


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
    if params.nodes > MAX_NODE_ID + 1 or params.zeta_k < 1:
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
