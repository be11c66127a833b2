"""The URL Frontier gRPC service (crawler-commons API v2.x) over a `Frontier`.

Every rpc of `connectors/urlfrontier/urlfrontier.proto` is answered. Bad arguments get
INVALID_ARGUMENT, an unknown URL NOT_FOUND, and a put item that cannot be used an ack
SKIPPED with the reason logged; nothing a client sends stops the server or reaches the
state unchecked. This is a single node: `local` changes nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from frontierflow.connectors.urlfrontier import urlfrontier_pb2 as pb
from frontierflow.connectors.urlfrontier import urlfrontier_pb2_grpc as pb_grpc
from frontierflow.connectors.urlfrontier.convert import (
    ItemProblem,
    checked_info,
    crawl_of,
    url_info,
    url_item,
)
from frontierflow.pipelines.urlfrontier.frontier import Frontier, Outcome
from frontierflow.state.urls import canonical_url, http_host

log = logging.getLogger(__name__)

DEFAULT_PAGE = 100
"""ListQueues and ListURLs answer this many when the request's size is 0."""
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""Largest request message the server takes (gRPC answers RESOURCE_EXHAUSTED past it)."""

_LEVELS = {
    pb.LogLevelParams.TRACE: logging.DEBUG,
    pb.LogLevelParams.DEBUG: logging.DEBUG,
    pb.LogLevelParams.INFO: logging.INFO,
    pb.LogLevelParams.WARN: logging.WARNING,
    pb.LogLevelParams.ERROR: logging.ERROR,
}
_STATUS = {True: pb.AckMessage.OK, False: pb.AckMessage.SKIPPED}


class Undecodable:
    """A message of a put stream that did not parse (gRPC takes None for a failed parse)."""


class URLFrontierService(pb_grpc.URLFrontierServicer):
    """The servicer: argument checks and message building; the state is the Frontier's."""

    def __init__(self, frontier: Frontier) -> None:
        self.frontier = frontier

    # ------------------------------------------------------------- nodes, crawls, activity
    def ListNodes(self, request: pb.Empty, context: grpc.ServicerContext) -> pb.StringList:
        return pb.StringList(values=[self.frontier.settings.node])

    def ListCrawls(self, request: pb.Local, context: grpc.ServicerContext) -> pb.StringList:
        return pb.StringList(values=self.frontier.crawls())

    def DeleteCrawl(self, request: pb.DeleteCrawlMessage, context: grpc.ServicerContext) -> pb.Long:
        crawl_id = _crawl(request.value, context)
        return pb.Long(value=self.frontier.delete(crawl_id, None))

    def SetActive(self, request: pb.Active, context: grpc.ServicerContext) -> pb.Empty:
        with self.frontier.lock:
            self.frontier.active = request.state
        return pb.Empty()

    def GetActive(self, request: pb.Local, context: grpc.ServicerContext) -> pb.Boolean:
        return pb.Boolean(state=self.frontier.active)

    def SetLogLevel(self, request: pb.LogLevelParams, context: grpc.ServicerContext) -> pb.Empty:
        level = _LEVELS.get(request.level)
        if level is None:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"unknown level {request.level}")
            return pb.Empty()
        logging.getLogger(request.package or None).setLevel(level)
        return pb.Empty()

    # ------------------------------------------------------------- queues
    def ListQueues(self, request: pb.Pagination, context: grpc.ServicerContext) -> pb.QueueList:
        crawl_id = _crawl(request.crawlID, context)
        names = self.frontier.queues(crawl_id, request.include_inactive)
        size = request.size or DEFAULT_PAGE
        page = names[request.start : request.start + size]
        return pb.QueueList(
            values=page, total=len(names), start=request.start, size=len(page), crawlID=crawl_id
        )

    def GetStats(
        self, request: pb.QueueWithinCrawlParams, context: grpc.ServicerContext
    ) -> pb.Stats:
        crawl_id = _crawl(request.crawlID, context)
        stats = self.frontier.stats(crawl_id, request.key)
        return pb.Stats(
            size=stats.size,
            inProcess=stats.in_process,
            counts={"completed": stats.completed, "active_queues": stats.active_queues},
            numberOfQueues=stats.queues,
            crawlID=crawl_id,
        )

    def DeleteQueue(
        self, request: pb.QueueWithinCrawlParams, context: grpc.ServicerContext
    ) -> pb.Long:
        crawl_id = _crawl(request.crawlID, context)
        if not request.key:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "DeleteQueue needs a queue key")
        return pb.Long(value=self.frontier.delete(crawl_id, request.key))

    def BlockQueueUntil(
        self, request: pb.BlockQueueParams, context: grpc.ServicerContext
    ) -> pb.Empty:
        crawl_id = _crawl(request.crawlID, context)
        if not request.key:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "BlockQueueUntil needs a queue key")
        self.frontier.set_queue(crawl_id, request.key, blocked_until_s=request.time)
        return pb.Empty()

    def SetDelay(self, request: pb.QueueDelayParams, context: grpc.ServicerContext) -> pb.Empty:
        crawl_id = _crawl(request.crawlID, context)
        self.frontier.set_queue(crawl_id, request.key, delay_s=request.delay_requestable)
        return pb.Empty()

    def SetCrawlLimit(
        self, request: pb.CrawlLimitParams, context: grpc.ServicerContext
    ) -> pb.Empty:
        crawl_id = _crawl(request.crawlID, context)
        if not request.key:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "SetCrawlLimit needs a queue key")
        self.frontier.set_queue(crawl_id, request.key, crawl_limit=request.limit)
        return pb.Empty()

    # ------------------------------------------------------------- serving
    def GetURLs(self, request: pb.GetParams, context: grpc.ServicerContext) -> Iterator[pb.URLInfo]:
        which = request.WhichOneof("item")
        crawls = None if which == "anyCrawlID" else [_crawl(request.crawlID, context)]
        served = self.frontier.get_urls(
            crawls,
            request.key,
            request.max_queues,
            request.max_urls_per_queue,
            request.delay_requestable,
        )
        sent = 0
        released = threading.Lock()

        def release_unsent() -> None:
            # a client gone mid-stream leaves what it did not get unlocked, not lost; runs
            # once, whether the rpc's end or the generator's close comes first
            if released.acquire(blocking=False):
                for one in served[sent:]:
                    self.frontier.release(one.crawl_id, one.url)

        context.add_callback(release_unsent)
        try:
            for one in served:
                yield url_info(one.url, one.crawl_id, one.record)
                sent += 1
        finally:
            release_unsent()

    def PutURLs(
        self, request_iterator: Iterator[pb.URLItem | Undecodable], context: grpc.ServicerContext
    ) -> Iterator[pb.AckMessage]:
        for item in request_iterator:
            if isinstance(item, Undecodable):
                log.info("item skipped: undecodable bytes")
                yield pb.AckMessage(ID="", status=pb.AckMessage.SKIPPED)
                continue
            try:
                status = _STATUS[self._put(item).ok]
            except Exception:  # the store failed: the item may be sent again
                log.exception("put failed")
                status = pb.AckMessage.FAIL
            yield pb.AckMessage(ID=item.ID or _url_of(item), status=status)

    def PutDiscovered(
        self,
        request_iterator: Iterator[pb.DiscoveredBatch | Undecodable],
        context: grpc.ServicerContext,
    ) -> Iterator[pb.BatchAck]:
        for batch in request_iterator:
            if isinstance(batch, Undecodable):
                log.info("batch skipped: undecodable bytes")
                yield pb.BatchAck(ID="", statuses=[])
                continue
            statuses = []
            for info in batch.items:
                try:
                    statuses.append(_STATUS[self._discovered(info).ok])
                except Exception:  # the store failed: the URL may be sent again
                    log.exception("put failed")
                    statuses.append(pb.AckMessage.FAIL)
            yield pb.BatchAck(ID=batch.ID, statuses=statuses)

    def _put(self, item: pb.URLItem) -> Outcome:
        which = item.WhichOneof("item")
        if which == "discovered":
            return self._discovered(item.discovered.info)
        if which == "known":
            try:
                checked = checked_info(item.known.info, self.frontier.settings.items)
            except ItemProblem as exc:
                return _refused(str(exc))
            outcome = self.frontier.put_known(checked, item.known.refetchable_from_date)
            return outcome if outcome.ok else _refused(outcome.reason)
        return _refused("URLItem holds neither a discovered nor a known item")

    def _discovered(self, info: pb.URLInfo) -> Outcome:
        try:
            checked = checked_info(info, self.frontier.settings.items)
        except ItemProblem as exc:
            return _refused(str(exc))
        return self.frontier.put_discovered(checked)

    # ------------------------------------------------------------- reading URLs
    def GetURLStatus(
        self, request: pb.URLStatusRequest, context: grpc.ServicerContext
    ) -> pb.URLItem:
        crawl_id = _crawl(request.crawlID, context)
        if http_host(request.url) is None:
            _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "not an absolute http(s) URL")
        url = canonical_url(request.url)
        record = self.frontier.url_record(crawl_id, url)
        if record is None or (request.key and request.key != record.queue):
            _abort(context, grpc.StatusCode.NOT_FOUND, f"no such URL in crawl {crawl_id!r}")
        assert record is not None  # _abort raised otherwise
        return url_item(url, crawl_id, record)

    def ListURLs(
        self, request: pb.ListUrlParams, context: grpc.ServicerContext
    ) -> Iterator[pb.URLItem]:
        crawl_id = _crawl(request.crawlID, context)
        match = _matcher(
            request.filter if request.HasField("filter") else "",
            request.HasField("ignoreCase") and request.ignoreCase,
        )
        size = request.size or DEFAULT_PAGE
        urls = list(self.frontier.list_urls(crawl_id, request.key, match))
        for url in urls[request.start : request.start + size]:
            record = self.frontier.url_record(crawl_id, url)
            if record is not None:  # removed since it was listed
                yield url_item(url, crawl_id, record)

    def CountURLs(self, request: pb.CountUrlParams, context: grpc.ServicerContext) -> pb.Long:
        crawl_id = _crawl(request.crawlID, context)
        match = _matcher(
            request.filter if request.HasField("filter") else "",
            request.HasField("ignoreCase") and request.ignoreCase,
        )
        return pb.Long(value=sum(1 for _ in self.frontier.list_urls(crawl_id, request.key, match)))

    def PurgeURLs(self, request: pb.PurgeUrlParams, context: grpc.ServicerContext) -> pb.Long:
        crawl_id = _crawl(request.crawlID, context)
        return pb.Long(value=self.frontier.purge(crawl_id, request.key, request.days))


def _crawl(crawl_id: str, context: grpc.ServicerContext) -> str:
    if len(crawl_id) > 256 or not crawl_id.isprintable():
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, "crawl id too long or not printable")
    return crawl_of(crawl_id)


def _matcher(text: str, ignore_case: bool) -> Callable[[str], bool]:
    if not text:
        return lambda _url: True
    if ignore_case:
        folded = text.casefold()
        return lambda url: folded in url.casefold()
    return lambda url: text in url


def _url_of(item: pb.URLItem) -> str:
    which = item.WhichOneof("item")
    if which == "discovered":
        return str(item.discovered.info.url)
    if which == "known":
        return str(item.known.info.url)
    return ""


def _refused(reason: str) -> Outcome:
    log.info("item skipped: %s", reason)
    return Outcome(False, reason)


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> None:
    context.abort(code, message)  # raises


def _register(service: URLFrontierService, server: grpc.Server) -> None:
    """Every rpc of the proto's service, as the generated registration would add them,
    except that the put streams parse each message themselves: an undecodable one becomes
    `Undecodable` (acknowledged SKIPPED) instead of a deserialisation failure inside gRPC, which
    ends the stream and, seen here with grpcio 1.85, can leave the server unable to stop."""
    handlers: dict[str, grpc.RpcMethodHandler] = {}
    for method in pb.DESCRIPTOR.services_by_name["URLFrontier"].methods:
        request = getattr(pb, method.input_type.name)
        response = getattr(pb, method.output_type.name)
        behaviour = getattr(service, method.name)
        parse = _lenient(request) if method.client_streaming else request.FromString
        kind = {
            (False, False): grpc.unary_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
            (True, True): grpc.stream_stream_rpc_method_handler,
        }[(method.client_streaming, method.server_streaming)]
        handlers[method.name] = kind(
            behaviour, request_deserializer=parse, response_serializer=response.SerializeToString
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("urlfrontier.URLFrontier", handlers),)
    )
    server.add_registered_method_handlers("urlfrontier.URLFrontier", handlers)


def _lenient(message: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return message.FromString(data)
        except DecodeError:
            return Undecodable()

    return parse


def serve(
    frontier: Frontier,
    address: str,
    *,
    max_workers: int = 8,
    flush_every_s: float = 1.0,
) -> tuple[grpc.Server, int, threading.Event]:
    """Start the gRPC server on `address` (host:port; port 0 picks one) and the thread that
    seeds outlinks whose parent never reported. Returns the server, its port and the event
    that stops that thread."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="urlfrontier"),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.so_reuseport", 0),
        ],
    )
    _register(URLFrontierService(frontier), server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    server.start()
    stop = threading.Event()

    def flush_loop() -> None:
        while not stop.wait(flush_every_s):
            try:
                frontier.flush_expired()
            except Exception:  # the loop must outlive one bad group; logged with its cause
                log.exception("seeding expired outlink groups failed")

    threading.Thread(target=flush_loop, name="urlfrontier-flush", daemon=True).start()
    return server, port, stop
