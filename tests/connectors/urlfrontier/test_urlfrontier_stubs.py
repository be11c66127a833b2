"""The committed gRPC stubs are what `infra/urlfrontier/gen.sh` makes of the committed
`.proto` (so nobody edits one without the other), and the proto keeps the URL Frontier
API's wire names and numbers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from frontierflow.connectors.urlfrontier import urlfrontier_pb2 as pb

ROOT = Path(__file__).resolve().parents[3]
STUBS = ("urlfrontier_pb2.py", "urlfrontier_pb2.pyi", "urlfrontier_pb2_grpc.py")


def test_stubs_are_current(tmp_path: Path) -> None:
    pytest.importorskip("grpc_tools", reason="grpcio-tools is not installed (.[dev])")
    subprocess.run(
        ["bash", str(ROOT / "infra" / "urlfrontier" / "gen.sh"), str(tmp_path)],
        check=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    for name in STUBS:
        committed = (ROOT / "connectors" / "urlfrontier" / name).read_text()
        assert (tmp_path / name).read_text() == committed, f"{name}: run infra/urlfrontier/gen.sh"


def test_wire_names_and_numbers() -> None:
    """A sample of the contract, checked against the published API by hand."""
    service = pb.DESCRIPTOR.services_by_name["URLFrontier"]
    assert pb.DESCRIPTOR.package == "urlfrontier"
    assert service.full_name == "urlfrontier.URLFrontier"
    assert len(service.methods) == 19
    put = service.methods_by_name["PutURLs"]
    assert put.input_type.name == "URLItem" and put.output_type.name == "AckMessage"
    fields = {f.name: f.number for f in pb.GetParams.DESCRIPTOR.fields}
    assert fields == {
        "max_urls_per_queue": 1,
        "max_queues": 2,
        "key": 3,
        "delay_requestable": 4,
        "anyCrawlID": 5,
        "crawlID": 6,
    }
    assert {f.name: f.number for f in pb.KnownURLItem.DESCRIPTOR.fields} == {
        "info": 1,
        "refetchable_from_date": 2,
    }
    assert {f.name: f.number for f in pb.URLItem.DESCRIPTOR.fields} == {
        "discovered": 1,
        "known": 2,
        "ID": 3,
        "creation_date": 4,
    }
    assert pb.AckMessage.SKIPPED == 1 and pb.AckMessage.FAIL == 2
