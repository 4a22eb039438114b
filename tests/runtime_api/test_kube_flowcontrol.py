"""Client-side flow control of :class:`~zkop.kube.client.KubeClient` (issue #22, part 7), against the API double.

client-go's ``rest.Request`` is the reference: one token bucket for every request (``tryThrottle``),
none for a watch's first request (``Watch``), and 429 / 5xx answers with ``Retry-After`` retried
after that many seconds, at most 10 times, each retry after a token (``withRetry``).

Every wait goes through a fake clock (the client's ``clock`` and ``sleep``, the bucket's ``clock``),
so nothing here sleeps and nothing is timed: a wait is asserted as the seconds the client asked
to sleep. The double injects the 429s (``ApiServer.fail_requests(count=, retry_after=)``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

import prometheus_client
import pytest
from zkop_testing.apiserver import ApiServer
from zkop_testing.clock import FakeClock

from zkop.kube.client import MAX_RETRIES, MERGE_PATCH, ApiException, KubeClient, resource_path, retry_after_seconds
from zkop.kube.flowcontrol import TokenBucket, client_rate_limiter
from zkop.runtime.metrics_auth import AuthError, DelegatingAuth

CONFIGMAPS = resource_path("", "v1", "configmaps", "default")


def _configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client_for(apiserver: ApiServer, clock: FakeClock) -> Iterator[Callable[..., KubeClient]]:
    """Builds clients on ``apiserver`` with the fake clock: ``client_for(qps=2, burst=3, max_retries=…)``."""
    made: list[KubeClient] = []

    def make(*, qps: float = -1, burst: int = 1, **kwargs: Any) -> KubeClient:
        client = KubeClient(apiserver.api_client(), default_timeout=30, clock=clock, sleep=clock.sleep,
                            rate_limiter=client_rate_limiter(qps, burst, clock=clock), **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def _attempts(apiserver: ApiServer, verb: str, plural: str = "configmaps") -> int:
    return sum(1 for r in apiserver.request_log if r.verb == verb and r.resource == plural)


def _sample(name: str, **labels: str) -> float:
    return prometheus_client.REGISTRY.get_sample_value(name, labels) or 0.0


def _host(apiserver: ApiServer) -> str:
    return f"127.0.0.1:{apiserver.port}"


# ------------------------------------------------------------------ the token bucket


def test_the_bucket_paces_requests_after_the_burst(
    apiserver: ApiServer, clock: FakeClock, client_for: Callable[..., KubeClient],
) -> None:
    client = client_for(qps=2, burst=3)
    host = _host(apiserver)
    count_before = _sample("rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host)
    sum_before = _sample("rest_client_rate_limiter_duration_seconds_sum", verb="GET", host=host)
    for _ in range(7):
        client.request("GET", CONFIGMAPS)
    # Three go at once from the full bucket, then one every 1/qps = 0.5 s: it waits, nothing is dropped.
    assert clock.slept == [0.5, 0.5, 0.5, 0.5]
    assert _attempts(apiserver, "list") == 7
    # client-go observes every wait, 0 included (tryThrottleWithInfo).
    assert _sample("rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host) - count_before == 7
    assert _sample("rest_client_rate_limiter_duration_seconds_sum", verb="GET", host=host) - sum_before == \
        pytest.approx(2.0)


def test_the_bucket_refills_while_the_client_is_idle(clock: FakeClock, client_for: Callable[..., KubeClient]) -> None:
    client = client_for(qps=2, burst=3)
    for _ in range(3):
        client.request("GET", CONFIGMAPS)
    clock.now += 10.0  # idle: refilled to the burst, no more
    for _ in range(4):
        client.request("GET", CONFIGMAPS)
    assert clock.slept == [0.5]


def test_every_verb_shares_the_one_bucket(apiserver: ApiServer, clock: FakeClock,
                                          client_for: Callable[..., KubeClient]) -> None:
    client = client_for(qps=1, burst=1)
    client.request("POST", CONFIGMAPS, body=_configmap("a"))
    client.request("PATCH", f"{CONFIGMAPS}/a", body={"data": {"k": "w"}}, content_type=MERGE_PATCH)
    client.request("GET", f"{CONFIGMAPS}/a")
    client.request("DELETE", f"{CONFIGMAPS}/a")
    assert clock.slept == [1.0, 1.0, 1.0]


def test_no_limiter_no_waits_and_no_limiter_metric(apiserver: ApiServer, clock: FakeClock,
                                                   client_for: Callable[..., KubeClient]) -> None:
    client = client_for(qps=-1)
    assert client.rate_limiter is None
    host = _host(apiserver)
    before = _sample("rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host)
    for _ in range(50):
        client.request("GET", CONFIGMAPS)
    assert clock.slept == []
    assert _sample("rest_client_rate_limiter_duration_seconds_count", verb="GET", host=host) == before


def test_a_watch_takes_no_token_its_retry_does(apiserver: ApiServer, clock: FakeClock,
                                               client_for: Callable[..., KubeClient]) -> None:
    client = client_for(qps=1, burst=1)
    query = {"allowWatchBookmarks": True, "timeoutSeconds": 1}
    client.watch(CONFIGMAPS, query=query, timeout=(5.0, 5.0)).close()
    client.request("GET", CONFIGMAPS)  # the bucket is still full: the watch took nothing
    assert clock.slept == []
    # A watch answered 429 is retried after Retry-After, and the retry waits for a token (withRetry.Before).
    apiserver.fail_requests(1.0, codes=(429,), methods=["watch"], count=1, retry_after="0")
    client.watch(CONFIGMAPS, query=query, timeout=(5.0, 5.0)).close()
    assert clock.slept == [1.0]
    assert _attempts(apiserver, "watch") == 3


def test_long_waits_are_logged_at_info_at_most_every_ten_seconds(
    clock: FakeClock, client_for: Callable[..., KubeClient], caplog: pytest.LogCaptureFixture,
) -> None:
    client = client_for(qps=0.5, burst=1)
    with caplog.at_level(logging.DEBUG, logger="zkop.kube.client"):
        for _ in range(7):  # the first goes at once, then waits of 2 s ending at fake 1002, 1004, … 1012
            client.request("GET", CONFIGMAPS)
    assert clock.slept == [2.0] * 6
    waits = [(r.levelno, r.getMessage()) for r in caplog.records if r.getMessage().startswith("waited")]
    assert [level for level, _ in waits] == [logging.INFO] + [logging.DEBUG] * 4 + [logging.INFO]
    assert waits[0][1] == "waited 2.000 s before sending GET /api/v1/namespaces/default/configmaps " \
                          "(client-side throttling, not priority and fairness)"


# ------------------------------------------------------------------ Retry-After


@pytest.mark.parametrize(("method", "verb"), [
    ("GET", "get"), ("POST", "create"), ("PUT", "update"), ("PATCH", "patch"), ("DELETE", "delete"),
])
def test_a_429_with_retry_after_is_retried_after_that_delay_and_succeeds(
    method: str, verb: str, apiserver: ApiServer, clock: FakeClock, client_for: Callable[..., KubeClient],
) -> None:
    client = client_for()
    client.request("POST", CONFIGMAPS, body=_configmap("a"))
    host = _host(apiserver)
    retried_429 = _sample("rest_client_request_retries_total", code="429", verb=method, host=host)
    sent_429 = _sample("rest_client_requests_total", code="429", method=method, host=host)
    requests = {
        "GET": lambda: client.request("GET", f"{CONFIGMAPS}/a"),
        "POST": lambda: client.request("POST", CONFIGMAPS, body=_configmap("b")),
        "PUT": lambda: client.request("PUT", f"{CONFIGMAPS}/a", body={**_configmap("a"), "data": {"k": "w"}}),
        "PATCH": lambda: client.request("PATCH", f"{CONFIGMAPS}/a", body={"data": {"k": "w"}},
                                        content_type=MERGE_PATCH),
        "DELETE": lambda: client.request("DELETE", f"{CONFIGMAPS}/a"),
    }
    apiserver.fail_requests(1.0, codes=(429,), methods=[verb], count=2, retry_after="7")
    answer = requests[method]()
    assert answer.get("kind") in ("ConfigMap", "Status")
    # Exactly the server's delay, twice; urllib3's own Retry-After retries (GET, PUT, DELETE) would have
    # slept for real and hidden an attempt from this count.
    assert clock.slept == [7, 7]
    assert _attempts(apiserver, verb) == 3 + (verb == "create")
    assert _sample("rest_client_requests_total", code="429", method=method, host=host) - sent_429 == 2
    assert _sample("rest_client_request_retries_total", code="429", verb=method, host=host) - retried_429 == 1


def test_a_503_with_retry_after_is_retried_a_500_without_is_not(
    apiserver: ApiServer, clock: FakeClock, client_for: Callable[..., KubeClient],
) -> None:
    client = client_for()
    apiserver.fail_requests(1.0, codes=(503,), methods=["create"], count=1, retry_after="2")
    assert client.request("POST", CONFIGMAPS, body=_configmap("a"))["metadata"]["name"] == "a"
    assert clock.slept == [2]
    apiserver.fail_requests(1.0, codes=(500,), methods=["create"], count=1)
    with pytest.raises(ApiException) as info:
        client.request("POST", CONFIGMAPS, body=_configmap("b"))
    assert info.value.status == 500
    assert clock.slept == [2] and _attempts(apiserver, "create") == 3


@pytest.mark.parametrize("header", [None, "Wed, 21 Oct 2015 07:28:00 GMT", "1.5"])
def test_a_429_without_whole_seconds_in_retry_after_is_not_retried(
    header: str | None, apiserver: ApiServer, clock: FakeClock, client_for: Callable[..., KubeClient],
) -> None:
    client = client_for()
    apiserver.fail_requests(1.0, codes=(429,), methods=["create"], count=1, retry_after=header)
    with pytest.raises(ApiException) as info:
        client.request("POST", CONFIGMAPS, body=_configmap("a"))
    assert info.value.status == 429
    assert clock.slept == [] and _attempts(apiserver, "create") == 1


def test_retries_are_bounded_and_end_in_the_error(
    apiserver: ApiServer, clock: FakeClock, client_for: Callable[..., KubeClient],
) -> None:
    client = client_for()
    apiserver.fail_requests(1.0, codes=(429,), methods=["create"], retry_after="1")
    with pytest.raises(ApiException) as info:
        client.request("POST", CONFIGMAPS, body=_configmap("a"))
    assert info.value.status == 429 and info.value.reason == "Too Many Requests"
    assert info.value.headers is not None and info.value.headers["Retry-After"] == "1"
    assert clock.slept == [1] * MAX_RETRIES == [1] * 10  # client-go's maxRetries
    assert _attempts(apiserver, "create") == 11
    apiserver.clear_request_log()
    with pytest.raises(ApiException):
        client_for(max_retries=2).request("POST", CONFIGMAPS, body=_configmap("a"))
    assert _attempts(apiserver, "create") == 3
    apiserver.clear_request_log()
    with pytest.raises(ApiException):
        client_for(max_retries=0).request("POST", CONFIGMAPS, body=_configmap("a"))
    assert _attempts(apiserver, "create") == 1


def test_no_retry_whose_wait_outlasts_the_request_timeout(
    apiserver: ApiServer, clock: FakeClock, client_for: Callable[..., KubeClient],
) -> None:
    client = client_for()
    apiserver.fail_requests(1.0, codes=(429,), methods=["create"], retry_after="4")
    with pytest.raises(ApiException):
        client.request("POST", CONFIGMAPS, body=_configmap("a"), timeout=10)
    assert clock.slept == [4, 4]  # a third wait would end 12 s after the first attempt
    apiserver.clear_request_log()
    apiserver.fail_requests(1.0, codes=(429,), methods=["create"], retry_after="3600")
    with pytest.raises(ApiException):
        client.request("POST", CONFIGMAPS, body=_configmap("a"))
    assert clock.slept == [4, 4] and _attempts(apiserver, "create") == 1


def test_each_retry_waits_for_a_token(apiserver: ApiServer, clock: FakeClock,
                                      client_for: Callable[..., KubeClient]) -> None:
    client = client_for(qps=1, burst=1)
    apiserver.fail_requests(1.0, codes=(429,), methods=["create"], count=2, retry_after="0")
    client.request("POST", CONFIGMAPS, body=_configmap("a"))
    assert clock.slept == [1.0, 1.0]  # no Retry-After wait (0 s), a token for each of the two retries


@pytest.mark.parametrize(("status", "header", "seconds"), [
    (429, "5", 5), (429, "+2", 2), (429, "0", 0), (500, "-3", 0), (503, "1", 1), (504, " 4 ", 4),
    (429, None, None), (429, "", None), (429, "1.5", None), (429, "Wed, 21 Oct 2015 07:28:00 GMT", None),
    (409, "5", None), (404, "1", None), (200, "1", None),
])
def test_retry_after_seconds_is_client_gos_check_wait(status: int, header: str | None, seconds: int | None) -> None:
    headers = {} if header is None else {"Retry-After": header}
    assert retry_after_seconds(status, headers) == seconds


def test_a_caller_that_retries_does_not_retry_what_the_client_retried(
    apiserver: ApiServer, clock: FakeClock, client_for: Callable[..., KubeClient],
) -> None:
    """The /metrics TokenReview retries 429 and 5xx itself (5 tries): on top of the client's 10 retries that
    would be 55 requests per review in a 429 storm."""
    auth = DelegatingAuth(client_for(), attempts=3, backoff=0.0)
    apiserver.fail_requests(1.0, codes=(429,), methods=["create"])
    with pytest.raises(AuthError, match="HTTP 429"):
        auth.authenticate("a-token")
    assert _attempts(apiserver, "create", "tokenreviews") == 1 + MAX_RETRIES
    # A 500 has no Retry-After: the client does not retry it, the review's own loop does.
    apiserver.clear_request_log()
    apiserver.fail_requests(1.0, codes=(500,), methods=["create"])
    with pytest.raises(AuthError, match="HTTP 500"):
        auth.authenticate("another-token")
    assert _attempts(apiserver, "create", "tokenreviews") == 3


# ------------------------------------------------------------------ the limiter's construction


def test_client_rate_limiter_follows_rest_client_for() -> None:
    assert client_rate_limiter(-1, 0) is None  # controller-runtime's QPS -1: no client-side limiter
    assert client_rate_limiter(-0.5, 10) is None
    bucket = client_rate_limiter(20, 30)
    assert isinstance(bucket, TokenBucket) and (bucket.qps, bucket.burst) == (20.0, 30)
    with pytest.raises(ValueError, match="qps must be > 0"):
        client_rate_limiter(0, 10)  # client-go would substitute its DefaultQPS 5; zkop refuses
    with pytest.raises(ValueError, match="burst must be >= 1"):
        client_rate_limiter(5, 0)
