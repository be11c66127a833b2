package frontierflow.harness;

import crawlercommons.urlfrontier.Urlfrontier.CrawlLimitParams;
import crawlercommons.urlfrontier.Urlfrontier.ListUrlParams;
import crawlercommons.urlfrontier.Urlfrontier.URLItem;
import crawlercommons.urlfrontier.Urlfrontier.URLStatusRequest;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/** The rpcs URL Frontier 2.4 added: SetCrawlLimit, GetURLStatus, ListURLs. */
public class Harness24 extends Harness {
  public Harness24(ManagedChannel channel) {
    super(channel);
  }

  @Override
  void runLater() throws Exception {
    blocking.setCrawlLimit(CrawlLimitParams.newBuilder().setKey("a.example").setLimit(10)
        .build());
    check("SetCrawlLimit", true, "");
    URLItem status = blocking.getURLStatus(URLStatusRequest.newBuilder().setUrl(A).build());
    check("GetURLStatus known", status.hasKnown()
        && status.getKnown().getInfo().getKey().equals("a.example"), status);
    try {
      blocking.getURLStatus(URLStatusRequest.newBuilder().setUrl(A + "nothing").build());
      check("GetURLStatus unknown", false, "no error");
    } catch (StatusRuntimeException e) {
      check("GetURLStatus unknown", e.getStatus().getCode() == Status.Code.NOT_FOUND, e);
    }
    List<String> urls = new ArrayList<>();
    Iterator<URLItem> it = blocking.listURLs(ListUrlParams.newBuilder().build());
    while (it.hasNext()) {
      URLItem item = it.next();
      urls.add(item.hasKnown() ? item.getKnown().getInfo().getUrl()
          : item.getDiscovered().getInfo().getUrl());
    }
    check("ListURLs", urls.equals(List.of(A, A + "child", B)), urls);
  }
}
