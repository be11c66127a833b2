"""A Scrapy project whose requests come from frontierflow's frontier.

Every FRONTIERFLOW_* setting can be given on the command line (`scrapy crawl pages -s
FRONTIERFLOW_BOOTSTRAP_SERVERS=127.0.0.1:9092 -s FRONTIERFLOW_FETCHER_ID=scrapy-1`) or
here. The README beside this file has the commands.
"""

BOT_NAME = "frontier_crawl"
SPIDER_MODULES = ["frontier_crawl.spiders"]
NEWSPIDER_MODULE = "frontier_crawl.spiders"

# the frontier serves the requests; one FetchEvent per answered entry goes back
SCHEDULER = "frontierflow.connectors.scrapy.scheduler.FrontierScheduler"
DOWNLOADER_MIDDLEWARES = {
    # the smallest order: it sees the final answer, after retries and robots.txt
    "frontierflow.connectors.scrapy.middleware.FetchEventMiddleware": 10,
    # above RetryMiddleware (550): a 429 or 503 pauses its host before Scrapy retries it
    "frontierflow.connectors.scrapy.middleware.PushbackMiddleware": 560,
}

FRONTIERFLOW_BOOTSTRAP_SERVERS = "127.0.0.1:9092"
FRONTIERFLOW_FETCHER_ID = "scrapy-1"  # the key of this crawler's ScalingDecisions
FRONTIERFLOW_GROUP_ID = "frontierflow-fetchers"  # Scrapy processes split the partitions
FRONTIERFLOW_MAX_PAGES = 0  # the budget in downloads; 0: none
FRONTIERFLOW_IDLE_EXIT = 0  # close after this many idle seconds; 0: wait for the frontier
FRONTIERFLOW_MIN_CONCURRENCY = 1  # ScalingDecisions are kept within these
FRONTIERFLOW_MAX_CONCURRENCY = 32
# FRONTIERFLOW_TOPICS = {"frontier": "frontier", "fetch_events": "fetch-events"}
# FRONTIERFLOW_KAFKA = {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}
# FRONTIERFLOW_KAFKA_CLIENT = "kafka-python"  # default: confluent-kafka when installed
# FRONTIERFLOW_FOLLOW_HOSTS = ["example.org"]  # keep only these hosts' outlinks

# fixed addresses for host names, e.g. virtual hosts on loopback:
# FRONTIERFLOW_RESOLVE = ["a.test:8080:127.0.0.1"]
DNS_RESOLVER = "frontierflow.connectors.scrapy.resolve.FixedAddressResolver"

# politeness is Scrapy's, per downloader slot (the scheduler hands one request per host
# at a time); ScalingDecisions change the total concurrency while the crawl runs
ROBOTSTXT_OBEY = True
DOWNLOAD_DELAY = 1.0
# Scrapy draws each delay from 0.5-1.5 x DOWNLOAD_DELAY unless this is off; off, the delay
# is a floor between two request starts on a host, like the reference fetcher's --delay
RANDOMIZE_DOWNLOAD_DELAY = False
AUTOTHROTTLE_ENABLED = False
CONCURRENT_REQUESTS = 4
DOWNLOAD_TIMEOUT = 30
DOWNLOAD_MAXSIZE = 5 * 1024 * 1024
USER_AGENT = "frontierflow-scrapy/0.1"
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
