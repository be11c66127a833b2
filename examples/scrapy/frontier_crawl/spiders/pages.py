"""A spider with nothing to start from: the frontier serves its requests. It yields one
item per HTML page (URL and title). The links it could follow are already in the page's
FetchEvent; with `-a follow=1` it yields a request for each anyway, to see that the
scheduler drops them (the count is the stat `frontierflow/spider_requests_dropped`)."""

from collections.abc import Iterator
from typing import Any

import scrapy


class PagesSpider(scrapy.Spider):
    name = "pages"

    def __init__(self, follow: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.follow_links = follow not in ("", "0")

    def parse(self, response: scrapy.http.Response, **kwargs: Any) -> Iterator[Any]:
        if not isinstance(response, scrapy.http.TextResponse):
            return
        yield {"url": response.url, "title": response.css("title::text").get()}
        if self.follow_links:
            yield from response.follow_all(css="a::attr(href)")
