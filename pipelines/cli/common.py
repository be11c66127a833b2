"""Options shared by the commands: the strategy and its settings, the crawl-speed
controller, comma-separated lists, and the Kafka topics and client settings of every
command that talks to a broker (`run`, `fetch`, `seed`, `urlfrontier`, `crawl-report`)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frontierflow.pipelines.speed.settings import DEFAULT_SPEED_CONTROLLER

if TYPE_CHECKING:
    from frontierflow.connectors.kafka import KafkaSettings
    from frontierflow.pipelines.core.strategy import Strategy
    from frontierflow.pipelines.embedded.observer import StepObserver
    from frontierflow.pipelines.speed.settings import ControllerSettings
    from frontierflow.pipelines.strategies.lafc import LafcSettings
    from frontierflow.pipelines.strategies.lafc_plus import LafcPlusSettings
    from frontierflow.state.forager_agent import AgentParams
    from frontierflow.state.foraging import ForagerParams
    from frontierflow.state.relevance import Topic
    from frontierflow.state.revisit_schedule import RevisitPolicy
    from frontierflow.state.tres import TresParams

NO_SPEED_CONTROLLER = "none"


def csv_list(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def add_engine_args(parser: argparse.ArgumentParser, state_required: bool = True) -> None:
    """The options every engine run takes: strategy, state, budget, step, random seed,
    the speed controller."""
    parser.add_argument("--strategy", default="ieca")
    parser.add_argument(
        "--state-dir", type=Path, required=state_required, help="RocksDB state directory"
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=1_000_000,
        help="crawl budget in pages, for IECA's δ_t and the PageRank interval",
    )
    parser.add_argument(
        "--step-size", type=int, default=500, help="events per step (its entries flushed together)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random strategy and of LAFC's automata"
    )
    parser.add_argument(
        "--topic",
        default=None,
        help="for lafc and best-first: a named topic (sockets, memory, ...), keywords, "
        "or 'kw:weight,...'",
    )
    parser.add_argument(
        "--sections",
        default=None,
        help="for forager-wl, forager-rl, forager-wlrl: comma-separated sections whose pages "
        "are relevant (pages carry their section as the term meta:article:section=NAME)",
    )
    parser.add_argument(
        "--forager",
        default="",
        metavar="NAME=VALUE,...",
        help="forager fleet constants (path_length, time_slice_ms, multiply_at, …; "
        "docs/FORAGERS.md lists each with its default and origin)",
    )
    add_lafc_args(parser)
    parser.add_argument(
        "--speed-controller",
        default=None,
        help="crawl-speed controller whose ScalingDecisions go out per fetcher and window: "
        f"{DEFAULT_SPEED_CONTROLLER} (default: Nandy, Sarkar & Das 2012's statistical-hypothesis "
        "controller), hypothesis-literal (its eq. 8 as printed), aimd, autothrottle, fixed-N, "
        f"or {NO_SPEED_CONTROLLER}",
    )
    parser.add_argument(
        "--speed-window-ms", type=int, default=10_000, help="speed statistics window length"
    )


def add_revisit_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--revisit`: when the job asks for a page again after downloading it."""
    parser.add_argument(
        "--revisit",
        default="none",
        metavar="POLICY",
        help="ask for every page again after each download: 'fixed:INTERVAL' (the download's "
        "time + INTERVAL, e.g. fixed:1h), 'learned[:EVERY]' (from the page's change rate, "
        "Cho & Garcia-Molina 2003, within one revisit per EVERY per host, default 1m), or "
        "'none' (default). Revisits wait for every page the strategy ranks",
    )


def revisit_policy(args: argparse.Namespace) -> RevisitPolicy | None:
    """`--revisit`'s policy (None: none); ValueError for a bad value."""
    from frontierflow.state.revisit_schedule import parse_revisit

    return parse_revisit(args.revisit)


def add_ui_args(parser: argparse.ArgumentParser) -> None:
    """The operator's page of an embedded-engine job (`pipelines/ui`)."""
    parser.add_argument(
        "--ui-port",
        type=int,
        default=None,
        help="serve the operator's page (live charts of this job) on http://127.0.0.1:PORT/ "
        "(0: a free port, logged)",
    )
    parser.add_argument(
        "--ui-host",
        default="127.0.0.1",
        help="address the page binds to (default: loopback only; any other shows the crawl's "
        "URLs to that network)",
    )


@contextlib.contextmanager
def operators_page(
    args: argparse.Namespace, command: str, strategy: Strategy[Any]
) -> Iterator[StepObserver | None]:
    """With `--ui-port`: the page's summary (the engine's observer) while its server runs;
    else None, and nothing is started."""
    if args.ui_port is None:
        yield None
        return
    from frontierflow.pipelines.ui import start_page

    summary, server = start_page(command, strategy, args.ui_port, args.ui_host)
    try:
        yield summary
    finally:
        server.close()


def speed_settings(args: argparse.Namespace) -> ControllerSettings | None:
    """The speed controller's settings the options name; None for `--speed-controller none`.
    Unknown names and bad windows raise `SpeedSettingsError` (a ValueError)."""
    from frontierflow.pipelines.speed.settings import settings_for

    name = args.speed_controller or DEFAULT_SPEED_CONTROLLER
    if name == NO_SPEED_CONTROLLER:
        return None
    return settings_for(name, window_ms=args.speed_window_ms)


def add_lafc_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """LAFC's settings (Akbari Torkestani 2012); defaults are the paper's calibration."""
    parser.add_argument("--lafc-c", type=float, default=0.8, help="LAFC's control threshold C")
    parser.add_argument("--lafc-a", type=float, default=0.09, help="LAFC's learning rate a")
    parser.add_argument(
        "--lafc-scheme", default="L_R-I", help="LAFC's scheme: L_R-I, L_R-P or L_R-eP"
    )
    parser.add_argument(
        "--lafc-plus",
        default="",
        metavar="NAME=VALUE,...",
        help="LAFC+'s constants (rate, gamma, depth, explore, shallow, shallow_power, shallow_gap, "
        "harvest_untried, skip_seen, url_order, local_first, evidence); default: the values "
        "chosen in docs/RESULTS.md",
    )
    parser.add_argument(
        "--tres",
        default="",
        metavar="NAME=VALUE,...",
        help="the TRES-style learner's constants (gamma, rate, target_period, warmup, "
        "min_split, max_depth, min_share)",
    )


def topic(text: str) -> Topic:
    """A named topic, or keywords (`'kw kw'` or `'kw:weight,...'`)."""
    from frontierflow.state.relevance import TOPICS, Topic

    return TOPICS[text] if text in TOPICS else Topic.parse(text)


def lafc_settings(args: argparse.Namespace, seed: int) -> LafcSettings:
    from frontierflow.pipelines.strategies.lafc import LafcSettings
    from frontierflow.state.automaton import LearningParams

    return LafcSettings(
        control_threshold=args.lafc_c,
        learning=LearningParams(a=args.lafc_a, scheme=args.lafc_scheme),
        seed=seed,
    )


def overrides(defaults: Any, text: str, option: str) -> Any:
    """`defaults` (a dataclass) with the `NAME=VALUE,…` of `text`; ValueError for unknown
    names and bad values, naming `option`."""
    import dataclasses

    values: dict[str, Any] = {}
    for item in csv_list(text):
        name, sep, raw = (part.strip() for part in item.partition("="))
        if not sep or not hasattr(defaults, name):
            names = ", ".join(type(defaults).__dataclass_fields__)
            raise ValueError(f"{option}: expected NAME=VALUE with NAME one of {names}")
        values[name] = type(getattr(defaults, name))(raw)
    return dataclasses.replace(defaults, **values)


def lafc_plus_settings(args: argparse.Namespace) -> LafcPlusSettings:
    """LAFC+'s settings from `--lafc-plus explore=0.1,rate=0.2`; ValueError for unknown names
    and values."""
    from frontierflow.pipelines.strategies.lafc_plus import LafcPlusSettings
    from frontierflow.state.lafc_plus import LafcPlusParams

    return LafcPlusSettings(overrides(LafcPlusParams(), args.lafc_plus, "--lafc-plus"))


def tres_params(args: argparse.Namespace) -> TresParams:
    """The TRES-style learner's constants from `--tres gamma=0.5,warmup=20`; ValueError for
    unknown names and values."""
    from frontierflow.state.tres import TresParams

    return overrides(TresParams(), args.tres, "--tres")


def fleet_constants(args: argparse.Namespace) -> tuple[ForagerParams, AgentParams]:
    """The foragers' and the agent's constants from `--forager NAME=VALUE,…` (each name is a
    field of one of them; `max_age_ms` sets both)."""
    from frontierflow.state.forager_agent import AgentParams
    from frontierflow.state.foraging import ForagerParams

    forager, agent = ForagerParams(), AgentParams()
    mine: list[str] = []
    theirs: list[str] = []
    for item in csv_list(args.forager):
        name = item.partition("=")[0].strip()
        if hasattr(forager, name):
            mine.append(item)
        if hasattr(agent, name):
            theirs.append(item)
        if not (hasattr(forager, name) or hasattr(agent, name)):
            names = ", ".join(
                [*ForagerParams.__dataclass_fields__, *AgentParams.__dataclass_fields__]
            )
            raise ValueError(f"--forager: expected NAME=VALUE with NAME one of {names}")
    return (
        overrides(forager, ",".join(mine), "--forager"),
        overrides(agent, ",".join(theirs), "--forager"),
    )


def strategy_from_args(args: argparse.Namespace) -> Strategy[Any]:
    """The strategy an engine command's options describe."""
    from frontierflow.pipelines.strategies import build_strategy
    from frontierflow.pipelines.strategies.tres import TresSettings

    return build_strategy(
        args.strategy,
        budget=args.budget,
        seed=args.seed,
        topic=topic(args.topic) if args.topic is not None else None,
        lafc=lafc_settings(args, args.seed),
        lafc_plus=lafc_plus_settings(args),
        tres=TresSettings(replace(tres_params(args), seed=args.seed)),
        sections=tuple(s.strip() for s in (args.sections or "").split(",") if s.strip()),
        fleet=fleet_constants(args),
    )


KAFKA_CLIENT_CHOICES = ("auto", "kafka-python", "confluent")
"""`--kafka-client`'s choices (`connectors.kafka_client.KAFKA_CLIENTS`)."""


def add_kafka_args(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, topics: Sequence[str]
) -> None:
    """`--topic-NAME` for each of `topics` (named as in `KafkaTopics`, with dashes), the
    repeatable `--kafka KEY=VALUE` client setting and `--kafka-client`."""
    for name in topics:
        parser.add_argument(f"--topic-{name}", default=name, help=f"default: {name}")
    parser.add_argument(
        "--kafka",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="client setting (TLS, SASL) in kafka-python's names, mapped for confluent-kafka, "
        "e.g. security_protocol=SASL_SSL; repeatable",
    )
    parser.add_argument(
        "--kafka-client",
        choices=KAFKA_CLIENT_CHOICES,
        default="auto",
        help="the Kafka client library: confluent-kafka (librdkafka, about ten times faster "
        "at producing), kafka-python, or auto (default): confluent-kafka when installed",
    )


def kafka_settings(args: argparse.Namespace, topics: Sequence[str], **extra: Any) -> KafkaSettings:
    """The broker settings of a command: `--bootstrap-servers`, the `--topic-NAME` of each of
    `topics` (the others keep their defaults), `--kafka`, `--kafka-client` and `extra`
    KafkaSettings fields."""
    from frontierflow.connectors.kafka import KafkaSettings, KafkaTopics

    names = {t.replace("-", "_"): getattr(args, "topic_" + t.replace("-", "_")) for t in topics}
    return KafkaSettings(
        bootstrap_servers=args.bootstrap_servers,
        topics=KafkaTopics(**names),
        client=client_settings(args.kafka),
        client_library=args.kafka_client,
        **extra,
    )


def client_settings(pairs: Sequence[str]) -> dict[str, object]:
    """`--kafka KEY=VALUE`s as kafka-python client settings (digits become ints)."""
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--kafka takes KEY=VALUE, got {pair!r}")
        out[key.strip()] = int(value) if value.strip().isdigit() else value
    return out


def add_host_policy_args(parser: argparse.ArgumentParser) -> None:
    """The options of the frontier's host rule (`state.hosts.HostPolicy`), one set for the
    job and the fetchers: both apply the same rule, so give both the same values."""
    from frontierflow.state.hosts import DEFAULT_POLICY as P

    g = parser.add_argument_group("hosts that push back, page limits")
    g.add_argument(
        "--backoff-base",
        type=float,
        default=P.backoff_base_ms / 1000,
        metavar="SECONDS",
        help="first back-off after a 429/503 without Retry-After, doubling each time",
    )
    g.add_argument(
        "--backoff-max",
        type=float,
        default=P.backoff_max_ms / 1000,
        metavar="SECONDS",
        help="longest back-off, and the cap on a Retry-After",
    )
    g.add_argument("--backoff-jitter", type=float, default=P.jitter, help="± share of a back-off")
    g.add_argument(
        "--failure-run",
        type=int,
        default=P.failure_run,
        help="5xx answers or transport failures in a row that back a host off",
    )
    g.add_argument(
        "--max-attempts",
        type=int,
        default=P.max_attempts,
        help="tries of a page answered 429, 503 or not at all before its answer stands",
    )
    g.add_argument(
        "--host-page-limit",
        type=int,
        default=None,
        help="pages of one host per crawl cycle (default: no limit)",
    )
    g.add_argument(
        "--domain-page-limit",
        type=int,
        default=None,
        help="pages of one registered domain per crawl cycle (default: no limit)",
    )


def host_policy(args: argparse.Namespace) -> Any:
    """The `HostPolicy` of `add_host_policy_args`' options (ValueError when invalid)."""
    from frontierflow.state.hosts import HostPolicy

    return HostPolicy(
        backoff_base_ms=round(args.backoff_base * 1000),
        backoff_max_ms=round(args.backoff_max * 1000),
        jitter=args.backoff_jitter,
        failure_run=args.failure_run,
        max_attempts=args.max_attempts,
        host_page_limit=args.host_page_limit,
        domain_page_limit=args.domain_page_limit,
    )
