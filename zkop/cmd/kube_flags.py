"""``zkop run``'s client-side flow control flags: ``--kube-api-qps`` and ``--kube-api-burst``.

Names and meaning as kube-controller-manager's and Flux's: ``rest.Config.QPS`` and ``Burst``, one
token bucket for every request of the API client (client-go ``flowcontrol.NewTokenBucketRateLimiter``);
a negative QPS turns it off, as controller-runtime's ``GetConfig`` (``QPS = -1``). Defaults 50/100
are Flux's (``fluxcd/pkg`` ``runtime/client.Options.BindFlags``); docs/operations.md, "Kubernetes
API flow control", says why.

Values are checked as component-base ``ValidateClientConnectionConfiguration`` does, and also
refused: a burst below 1 (x/time/rate lets nothing through a 0 burst), a QPS of 0 (client-go would
read it as its default 5), NaN or infinity.
"""

from __future__ import annotations

import argparse
import math

from zkop.cmd.flags import positive_int
from zkop.operator.options import DEFAULT_KUBE_API_BURST, DEFAULT_KUBE_API_QPS

__all__ = ["DEFAULT_KUBE_API_BURST", "DEFAULT_KUBE_API_QPS", "add_flags", "kube_api_qps"]



def kube_api_qps(text: str) -> float:
    """argparse type for ``--kube-api-qps``: requests per second above 0, or a negative number (off) → ``-1.0``.

    Raises:
        argparse.ArgumentTypeError: not a number, NaN or infinite, or 0 (client-go would read 0 as its
            default 5 requests per second; zkop asks for what is meant).
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number; use -1 to turn the limiter off")
    if value == 0:
        raise argparse.ArgumentTypeError("must be more than 0, or -1 to turn the client-side limiter off "
                                         "(client-go would read 0 as its default, 5)")
    return -1.0 if value < 0 else value


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--kube-api-qps`` and ``--kube-api-burst`` to ``parser`` (the ``zkop run`` parser)."""
    group = parser.add_argument_group(
        "Kubernetes API client",
        "One token bucket paces every request of the operator's API client (informers' lists, writes, "
        "Events, the Lease); a request waits for a token, none is dropped. A watch's first request takes "
        "none. Answers 429 or 5xx with Retry-After are retried after that many seconds, up to 10 times.")
    group.add_argument("--kube-api-qps", type=kube_api_qps, default=DEFAULT_KUBE_API_QPS, metavar="QPS",
                       help="requests per second to the API server, on average; -1 (any negative value) turns "
                            "the client-side limiter off and leaves it to the server's API Priority and Fairness "
                            "(controller-runtime's default). The default is Flux's: a Flux apply of about 50 "
                            "objects goes out without waiting, a cold start of thousands is paced "
                            f"(default {DEFAULT_KUBE_API_QPS:g})")
    group.add_argument("--kube-api-burst", type=positive_int, default=DEFAULT_KUBE_API_BURST, metavar="N",
                       help="requests that may go at once before --kube-api-qps paces them (at least 1; "
                            f"default {DEFAULT_KUBE_API_BURST})")
