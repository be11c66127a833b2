package frontierflow.harness;

import crawlercommons.urlfrontier.URLFrontierGrpc;
import crawlercommons.urlfrontier.Urlfrontier.AckMessage;
import crawlercommons.urlfrontier.Urlfrontier.Active;
import crawlercommons.urlfrontier.Urlfrontier.BlockQueueParams;
import crawlercommons.urlfrontier.Urlfrontier.DeleteCrawlMessage;
import crawlercommons.urlfrontier.Urlfrontier.DiscoveredURLItem;
import crawlercommons.urlfrontier.Urlfrontier.Empty;
import crawlercommons.urlfrontier.Urlfrontier.GetParams;
import crawlercommons.urlfrontier.Urlfrontier.KnownURLItem;
import crawlercommons.urlfrontier.Urlfrontier.Local;
import crawlercommons.urlfrontier.Urlfrontier.LogLevelParams;
import crawlercommons.urlfrontier.Urlfrontier.Pagination;
import crawlercommons.urlfrontier.Urlfrontier.QueueDelayParams;
import crawlercommons.urlfrontier.Urlfrontier.QueueList;
import crawlercommons.urlfrontier.Urlfrontier.QueueWithinCrawlParams;
import crawlercommons.urlfrontier.Urlfrontier.Stats;
import crawlercommons.urlfrontier.Urlfrontier.StringList;
import crawlercommons.urlfrontier.Urlfrontier.URLInfo;
import crawlercommons.urlfrontier.Urlfrontier.URLItem;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Calls every rpc of the URL Frontier API that the linked urlfrontier-API version has,
 * through that version's own generated stubs, against the server on 127.0.0.1:PORT, and
 * checks the answers. Prints "CHECK name" per passed check; exits 1 at the first failure.
 * The rpcs added in 2.4 are in Harness24 (compiled only against 2.4).
 */
public class Harness {
  static final String A = "https://a.example/";
  static final String B = "https://b.example/";

  final URLFrontierGrpc.URLFrontierBlockingStub blocking;
  final URLFrontierGrpc.URLFrontierStub async;

  Harness(ManagedChannel channel) {
    blocking = URLFrontierGrpc.newBlockingStub(channel);
    async = URLFrontierGrpc.newStub(channel);
  }

  static void check(String name, boolean ok, Object detail) {
    if (!ok) {
      System.out.println("FAILED " + name + ": " + detail);
      System.exit(1);
    }
    System.out.println("CHECK " + name);
  }

  static URLInfo info(String url, String parent) {
    URLInfo.Builder b = URLInfo.newBuilder().setUrl(url);
    if (parent != null) {
      b.putMetadata("url.path", StringList.newBuilder().addValues(parent).build());
    }
    return b.build();
  }

  static URLItem discovered(String url, String parent) {
    return URLItem.newBuilder()
        .setDiscovered(DiscoveredURLItem.newBuilder().setInfo(info(url, parent)))
        .setID(url)
        .build();
  }

  static URLItem known(String url) {
    return URLItem.newBuilder()
        .setKnown(KnownURLItem.newBuilder().setInfo(info(url, null)).setRefetchableFromDate(0))
        .setID(url)
        .build();
  }

  /** PutURLs through the async stub, as StormCrawler's status updater does. */
  List<AckMessage.Status> put(URLItem... items) throws InterruptedException {
    List<AckMessage.Status> acks = new ArrayList<>();
    CountDownLatch done = new CountDownLatch(1);
    StreamObserver<URLItem> out =
        async.putURLs(
            new StreamObserver<AckMessage>() {
              public void onNext(AckMessage ack) {
                synchronized (acks) {
                  acks.add(ack.getStatus());
                }
              }

              public void onError(Throwable t) {
                System.out.println("FAILED putURLs: " + t);
                System.exit(1);
              }

              public void onCompleted() {
                done.countDown();
              }
            });
    for (URLItem item : items) {
      out.onNext(item);
    }
    out.onCompleted();
    check("putURLs completes", done.await(30, TimeUnit.SECONDS), "no completion in 30 s");
    return acks;
  }

  List<String> get(int perQueue) {
    List<String> urls = new ArrayList<>();
    Iterator<URLInfo> it =
        blocking.getURLs(
            GetParams.newBuilder().setMaxUrlsPerQueue(perQueue).setCrawlID("").build());
    while (it.hasNext()) {
      urls.add(it.next().getUrl());
    }
    return urls;
  }

  void run() throws Exception {
    List<AckMessage.Status> acks =
        put(discovered(A, null), discovered(B, null), discovered(A + "child", A),
            discovered("not a url", null));
    check("PutURLs acks", acks.equals(List.of(AckMessage.Status.OK, AckMessage.Status.OK,
        AckMessage.Status.OK, AckMessage.Status.SKIPPED)), acks);
    List<String> first = get(5);
    check("GetURLs serves the seeds", first.size() == 2 && first.containsAll(List.of(A, B)),
        first);
    check("PutURLs known", put(known(A)).equals(List.of(AckMessage.Status.OK)), "");
    List<String> second = get(5);
    check("GetURLs serves the outlink", second.equals(List.of(A + "child")), second);

    StringList nodes = blocking.listNodes(Empty.getDefaultInstance());
    check("ListNodes", nodes.getValuesCount() == 1, nodes);
    StringList crawls = blocking.listCrawls(Local.getDefaultInstance());
    check("ListCrawls", crawls.getValuesList().equals(List.of("DEFAULT")), crawls);
    QueueList queues =
        blocking.listQueues(Pagination.newBuilder().setIncludeInactive(true).build());
    check("ListQueues", queues.getValuesList().equals(List.of("a.example", "b.example"))
        && queues.getTotal() == 2, queues);
    Stats stats = blocking.getStats(QueueWithinCrawlParams.getDefaultInstance());
    check("GetStats", stats.getNumberOfQueues() == 2 && stats.getInProcess() == 2
        && stats.getCountsOrDefault("completed", -1) == 1, stats);
    blocking.blockQueueUntil(BlockQueueParams.newBuilder().setKey("b.example")
        .setTime(System.currentTimeMillis() / 1000 + 3600).build());
    QueueList active = blocking.listQueues(Pagination.getDefaultInstance());
    check("BlockQueueUntil", active.getValuesList().equals(List.of("a.example")), active);
    blocking.setDelay(QueueDelayParams.newBuilder().setKey("a.example").setDelayRequestable(5)
        .build());
    check("SetDelay", true, "");
    blocking.setActive(Active.newBuilder().setState(false).build());
    check("SetActive/GetActive false",
        !blocking.getActive(Local.getDefaultInstance()).getState(), "");
    blocking.setActive(Active.newBuilder().setState(true).build());
    check("SetActive/GetActive true",
        blocking.getActive(Local.getDefaultInstance()).getState(), "");
    blocking.setLogLevel(LogLevelParams.newBuilder().setPackage("frontierflow")
        .setLevel(LogLevelParams.Level.INFO).build());
    check("SetLogLevel", true, "");

    runLater();

    long deleted = blocking.deleteQueue(
        QueueWithinCrawlParams.newBuilder().setKey("b.example").build()).getValue();
    check("DeleteQueue", deleted == 1, deleted);
    long gone = blocking.deleteCrawl(DeleteCrawlMessage.newBuilder().setValue("DEFAULT")
        .build()).getValue();
    check("DeleteCrawl", gone == 2, gone);
    check("ListCrawls after DeleteCrawl",
        blocking.listCrawls(Local.getDefaultInstance()).getValuesCount() == 0, "");
  }

  /** The rpcs a later API version added; none in this one. */
  void runLater() throws Exception {}

  public static void main(String[] args) throws Exception {
    ManagedChannel channel =
        ManagedChannelBuilder.forAddress("127.0.0.1", Integer.parseInt(args[0]))
            .usePlaintext().build();
    Harness harness;
    try {
      harness = (Harness) Class.forName("frontierflow.harness.Harness24")
          .getConstructor(ManagedChannel.class).newInstance(channel);
    } catch (ClassNotFoundException e) {
      harness = new Harness(channel);
    }
    harness.run();
    channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    System.out.println("ALL CHECKS PASSED");
  }
}
