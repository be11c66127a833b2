"""The Dataflow path, checked without a cloud account: the replay pipeline's graph is built
with Dataflow's pipeline options (validated by Beam, never submitted), and the Flex Template
files (Dockerfile, metadata.json, requirements.txt) agree with the entry point and with
pyproject.toml."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import (
    DebugOptions,
    GoogleCloudOptions,
    PipelineOptions,
    SetupOptions,
    StandardOptions,
    WorkerOptions,
)
from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.dataflow.dataflow_runner import DataflowRunner

from frontierflow.pipelines.beam import dataflow_main
from frontierflow.pipelines.beam.replay import build_replay
from frontierflow.pipelines.strategies import build_strategy

REPO = Path(__file__).resolve().parents[3]
DATAFLOW = REPO / "infra" / "dataflow"

# Beam checks these when the pipeline is created: project ids have 6-30 characters and
# bucket names at least 3, so the shortest plausible values are used.
DATAFLOW_ARGS = [
    "--runner=DataflowRunner",
    "--project=frontierflow-test",
    "--region=europe-west1",
    "--temp_location=gs://frontierflow-test/tmp",
    "--staging_location=gs://frontierflow-test/staging",
    "--setup_file=./pyproject.toml",
    "--experiments=use_runner_v2",
    "--autoscaling_algorithm=THROUGHPUT_BASED",
    "--max_num_workers=10",
]
TEMPLATE_ARGS = [
    "--log=gs://frontierflow-test/crawls/events.avro",
    "--out=gs://frontierflow-test/replays/run1",
    "--strategy=opic",
    "--budget=5000",
]
TOP_LEVEL_STEPS = {"Read", "Frontier", "Write"}


def _dataflow_graph() -> tuple[PipelineOptions, beam.Pipeline, beam_runner_api_pb2.Pipeline]:
    args, beam_args = dataflow_main.parse_args([*TEMPLATE_ARGS, *DATAFLOW_ARGS])
    options = PipelineOptions(beam_args)
    pipeline = beam.Pipeline(options=options)  # validates the options; no run()
    strategy = build_strategy(args.strategy, budget=args.budget)
    build_replay(pipeline, args.log, strategy, args.out)
    return options, pipeline, pipeline.to_runner_api()


def _transforms(proto: beam_runner_api_pb2.Pipeline) -> dict[str, Any]:
    return {t.unique_name: t for t in proto.components.transforms.values()}


# ---------------------------------------------------------------- (a) the graph on Dataflow


def test_template_parameters_and_beam_options_are_split() -> None:
    args, beam_args = dataflow_main.parse_args([*TEMPLATE_ARGS, *DATAFLOW_ARGS])
    assert (args.log, args.out) == (
        "gs://frontierflow-test/crawls/events.avro",
        "gs://frontierflow-test/replays/run1",
    )
    assert (args.strategy, args.budget) == ("opic", 5000)
    assert beam_args == DATAFLOW_ARGS
    with pytest.raises(ValueError, match="budget"):
        dataflow_main.parse_args(["--log=x", "--out=y", "--budget=0"])
    with pytest.raises(SystemExit):  # --out is required
        dataflow_main.parse_args(["--log=x"])


def test_graph_builds_with_dataflow_options() -> None:
    options, pipeline, proto = _dataflow_graph()
    assert type(pipeline.runner).__name__ == "DataflowRunner"
    transforms = _transforms(proto)
    assert set(transforms) >= TOP_LEVEL_STEPS
    (root_id,) = proto.root_transform_ids
    root = proto.components.transforms[root_id]
    top = {proto.components.transforms[t].unique_name for t in root.subtransforms}
    assert top == TOP_LEVEL_STEPS
    # the four shuffles of the replay: by URL (repeats), by bucket of positions (the
    # clock), by URL (the fold), by host (its answers); none gathers the log on one key
    shuffles = {
        name
        for name, t in transforms.items()
        if t.spec.urn == common_urns.primitives.GROUP_BY_KEY.urn
    }
    assert {
        "Frontier/Repeats/PageFetches",
        "Frontier/Route/BucketFetches",
        "Frontier/Update/ByShard",
        "Frontier/Hosts/AnswersByGroup",
    } <= shuffles
    # the clock's counts per bucket are combined, not grouped on one key
    assert any(name.startswith("Frontier/Clock/PerBucket") for name in transforms)
    # a bounded replay visits each URL once: no step keeps state
    for name, t in transforms.items():
        if t.spec.urn == common_urns.primitives.PAR_DO.urn:
            payload = beam_runner_api_pb2.ParDoPayload.FromString(t.spec.payload)
            assert not payload.state_specs, name
    assert options.view_as(StandardOptions).runner == "DataflowRunner"


def test_dataflow_options_validate() -> None:
    options, pipeline, _ = _dataflow_graph()
    assert PipelineOptionsValidator(options, pipeline.runner).validate() == []
    cloud = options.view_as(GoogleCloudOptions)
    assert (cloud.project, cloud.region) == ("frontierflow-test", "europe-west1")
    assert cloud.temp_location == "gs://frontierflow-test/tmp"
    assert cloud.staging_location == "gs://frontierflow-test/staging"
    assert options.view_as(StandardOptions).runner == "DataflowRunner"
    assert options.view_as(DebugOptions).lookup_experiment("use_runner_v2")
    workers = options.view_as(WorkerOptions)
    assert (workers.autoscaling_algorithm, workers.max_num_workers) == ("THROUGHPUT_BASED", 10)
    assert options.view_as(SetupOptions).setup_file == "./pyproject.toml"


@pytest.mark.parametrize(
    ("drop", "add", "complaint"),
    [
        # one bad location is replaced by the other; both bad (and no GCP client libraries
        # to create a default bucket) is an error
        (("--temp_location", "--staging_location"), ["--temp_location=/tmp/x"], "GCS path"),
        (("--project",), ["--project=p"], "Project ID"),
        (("--region",), [], "region"),
    ],
)
def test_bad_dataflow_options_are_refused(
    drop: tuple[str, ...], add: list[str], complaint: str
) -> None:
    args = [a for a in DATAFLOW_ARGS if a.split("=")[0] not in drop] + add
    options = PipelineOptions(args)
    errors = PipelineOptionsValidator(options, DataflowRunner()).validate()
    assert any(complaint in e for e in errors), errors
    with pytest.raises(ValueError, match="validations errors"):
        beam.Pipeline(options=options)


# ---------------------------------------------------------------- (b) metadata.json


def test_metadata_matches_the_entry_point() -> None:
    metadata = json.loads((DATAFLOW / "metadata.json").read_text())
    assert metadata["name"] and metadata["description"]
    params = {p["name"]: p for p in metadata["parameters"]}
    parser = dataflow_main.build_parser()
    options = {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"}
    assert set(params) == set(options) == {"log", "out", "strategy", "budget"}
    param_types = {"TEXT", "GCS_READ_FILE", "GCS_WRITE_FILE", "GCS_WRITE_FOLDER", "NUMBER"}
    for name, param in params.items():
        assert {"name", "label", "helpText"} <= set(param), name
        assert param["label"] and param["helpText"], name
        assert param.get("paramType", "TEXT") in param_types, name
        # optional in the template exactly when the entry point has a default
        assert param.get("isOptional", False) == (not options[name].required), name
        for regex in param.get("regexes", []):
            re.compile(regex)
    # the regexes accept what the entry point accepts, and the tests' own values
    values = dict(a.removeprefix("--").split("=", 1) for a in TEMPLATE_ARGS)
    values["strategy"] = options["strategy"].default
    values["budget"] = str(options["budget"].default)
    for name, value in values.items():
        for regex in params[name].get("regexes", []):
            assert re.fullmatch(regex, value), (name, value, regex)
    assert not re.fullmatch(params["strategy"]["regexes"][0], "pagerank")
    assert not re.fullmatch(params["budget"]["regexes"][0], "0")


# ---------------------------------------------------------------- (c) Dockerfile, requirements


def _dockerfile_env() -> dict[str, str]:
    text = (DATAFLOW / "Dockerfile").read_text()
    workdir = re.search(r"^ARG WORKDIR=(\S+)", text, re.M)
    assert workdir, "Dockerfile sets no WORKDIR"
    env = {
        m.group(1): m.group(2).replace("${WORKDIR}", workdir.group(1))
        for m in re.finditer(r'^ENV (\w+)="?([^"\n]+)"?', text, re.M)
    }
    assert text.splitlines()[0].startswith("#")
    assert re.search(
        r"^FROM gcr\.io/dataflow-templates-base/python311-template-launcher-base\b", text, re.M
    )
    return {k: v.removeprefix(workdir.group(1) + "/") for k, v in env.items()}


def test_dockerfile_names_files_that_exist() -> None:
    env = _dockerfile_env()
    assert env["FLEX_TEMPLATE_PYTHON_PY_FILE"] == "pipelines/beam/dataflow_main.py"
    assert env["FLEX_TEMPLATE_PYTHON_REQUIREMENTS_FILE"] == "infra/dataflow/requirements.txt"
    assert env["FLEX_TEMPLATE_PYTHON_SETUP_FILE"] == "pyproject.toml"
    for key in (
        "FLEX_TEMPLATE_PYTHON_PY_FILE",
        "FLEX_TEMPLATE_PYTHON_REQUIREMENTS_FILE",
        "FLEX_TEMPLATE_PYTHON_SETUP_FILE",
    ):
        assert (REPO / env[key]).is_file(), key
    # the launcher file runs as a script: it must call main() under __main__
    source = (REPO / env["FLEX_TEMPLATE_PYTHON_PY_FILE"]).read_text()
    assert 'if __name__ == "__main__":' in source and "main()" in source
    # every folder the package is built from is copied into the image
    text = (DATAFLOW / "Dockerfile").read_text()
    package_dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    for folder in set(package_dirs.values()):
        assert re.search(rf"^COPY {folder} ", text, re.M), folder


def _requirement_name(spec: str) -> str:
    match = re.match(r"[A-Za-z0-9_.-]+", spec)
    assert match, spec
    return match.group(0).lower().replace("_", "-")


def _pins(specs: list[str]) -> dict[str, str]:
    return {_requirement_name(s): re.sub(r"\[[^]]*\]", "", s.split(";")[0]) for s in specs}


def test_requirements_match_pyproject() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = (DATAFLOW / "requirements.txt").read_text().splitlines()
    requirements = [s.strip() for s in lines if s.strip() and not s.startswith("#")]
    wanted, listed = _pins(project["dependencies"]), _pins(requirements)
    assert set(wanted) == set(listed)
    assert listed == wanted  # same versions and bounds, extras aside
    beam_pin = re.search(r"==([0-9.]+)$", wanted["apache-beam"])
    assert beam_pin and beam_pin.group(1) == beam.__version__
    assert "apache-beam[gcp]==" + beam_pin.group(1) in requirements
