"""Token budgets (issue 30) driven by an independent client, Python grpcio, as Envoy sends
them: envoyproxy/ratelimit's token-quota flow (integration-test/scripts/token-quota.sh)
and an apply_on_stream_done sequence on the README's LLM-gateway example.

Run by tollgate-server/tests/python_budgets.rs, once per backend (in process, Redis exact
mode), against the real binary
serving a directory with:
    rl.yaml   envoyproxy/ratelimit's examples/ratelimit/config/example.yaml, its two
              quota-mode services made budgets (a `budget: true` line each)
    llm.yaml  tollgate-server/testdata/budgets/llm.yaml (the README's example)
and these variables:
    TOLLGATE_GRPC     host:port of the gRPC listener
    TOLLGATE_STUBS    directory of the modules grpcio-tools generated from tollgate-server/proto
"""
import os
import sys
import time
import unittest
import uuid

sys.path.insert(0, os.environ["TOLLGATE_STUBS"])

import grpc  # noqa: E402
from envoy.service.ratelimit.v3 import rls_pb2, rls_pb2_grpc  # noqa: E402
from envoy.extensions.common.ratelimit.v3 import ratelimit_pb2  # noqa: E402

OK = rls_pb2.RateLimitResponse.OK
OVER = rls_pb2.RateLimitResponse.OVER_LIMIT

STUB = rls_pb2_grpc.RateLimitServiceStub(grpc.insecure_channel(os.environ["TOLLGATE_GRPC"]))


def desc(*pairs, hits=None, negative=False):
    d = ratelimit_pb2.RateLimitDescriptor(
        entries=[ratelimit_pb2.RateLimitDescriptor.Entry(key=k, value=v) for k, v in pairs]
    )
    if hits is not None:
        d.hits_addend.value = hits
    d.is_negative_hits = negative
    return d


def call(domain, *descriptors):
    req = rls_pb2.RateLimitRequest(domain=domain, descriptors=list(descriptors))
    return STUB.ShouldRateLimit(req, timeout=5)


def codes(r):
    return [(s.code, s.limit_remaining) for s in r.statuses]


def settle():
    """Waits until at least 10 s remain in the minute (fixed windows of a minute)."""
    s = time.time() % 60
    if s > 50:
        time.sleep(61 - s)


class TokenQuotaSh(unittest.TestCase):
    def test_token_quota_sh(self):
        """token-quota.sh: /tokenquota checks (service, service_2) with hits_addend 0 before
        each request and sends it with hits_addend 1 when the stream is done. service_2 is
        2 a minute: requests 1 to 3 pass, the 3rd's hit goes past the quota, the 4th is
        denied until the minute turns over (the script's one-minute wait is left out)."""
        settle()
        service_2 = ("service", "service_2")
        for i in (1, 2, 3):
            r = call("rl", desc(service_2, hits=0))
            self.assertEqual(r.overall_code, OK, f"request {i}")
            self.assertEqual(codes(r), [(OK, 3 - i)])
            done = call("rl", desc(service_2, hits=1))
            want = (OK, 2 - i) if i <= 2 else (OVER, 0)
            self.assertEqual(codes(done), [want], f"request {i}'s hit")
        r = call("rl", desc(service_2, hits=0))
        self.assertEqual(r.overall_code, OVER, "request 4")
        self.assertEqual(codes(r), [(OVER, 0)])
        # A fixed window: over until the top of the minute.
        left = 60 - int(time.time()) % 60
        self.assertIn(r.statuses[0].duration_until_reset.seconds, (left, left + 1))


class ApplyOnStreamDone(unittest.TestCase):
    """The README's LLM gateway: before the request Envoy checks three budgets with
    hits_addend 0; when the stream is done it sends the same descriptors with the answer's
    tokens (apply_on_stream_done)."""

    def three(self, user, n, model="large"):
        return (
            desc(("user", user), hits=n),
            desc(("model", model), hits=n),
            desc(("generic_key", "global"), hits=n),
        )

    def test_check_charge_debt_and_refund(self):
        user = "py-" + uuid.uuid4().hex[:10]
        r = call("llm", *self.three(user, 0))
        self.assertEqual(r.overall_code, OK)
        self.assertEqual(r.statuses[0].limit_remaining, 10_000)
        # The answer cost 10,300 tokens: 300 past the user's 10,000.
        charged_at = time.monotonic()
        done = call("llm", *self.three(user, 10_300))
        self.assertEqual(done.overall_code, OVER)
        self.assertEqual(codes(done)[0], (OVER, 0))
        self.assertEqual([s.code for s in done.statuses[1:]], [OK, OK])
        # The next check is denied while the user owes; duration_until_reset: her 10,000
        # back, the 300 owed included (10,300 tokens at 6 ms), rounded up.
        r = call("llm", *self.three(user, 0))
        self.assertEqual(r.overall_code, OVER)
        self.assertEqual([s.code for s in r.statuses], [OVER, OK, OK])
        # 61.8 s from the charge, less the calls' time since (61 under heavy load).
        self.assertIn(r.statuses[0].duration_until_reset.seconds, (61, 62))
        headers = {h.key: h.value for h in r.response_headers_to_add}
        self.assertIn(
            headers["RateLimit"], ('"user_tokens";r=0;t=62', '"user_tokens";r=0;t=61')
        )
        self.assertEqual(headers["RateLimit-Policy"], '"user_tokens";q=10000;w=60')
        # Another user is not concerned.
        self.assertEqual(call("llm", *self.three(user + "-other", 0)).overall_code, OK)
        # 500 tokens given back (is_negative_hits): the debt is paid, 200 left.
        r = call("llm", desc(("user", user), hits=500, negative=True))
        self.assertEqual(r.overall_code, OK)
        # Plus what refilled since the charge (a token every 6 ms: on a busy machine the
        # calls above may take a while; a fixed slack made this flaky under load).
        refilled = int((time.monotonic() - charged_at) / 0.006) + 1
        self.assertIn(r.statuses[0].limit_remaining, range(200, 200 + refilled + 1))
        r = call("llm", *self.three(user, 0))
        self.assertEqual(r.overall_code, OK)

    def test_a_debt_is_paid_as_the_tokens_come(self):
        user = "py-" + uuid.uuid4().hex[:10]
        start = time.monotonic()
        call("llm", *self.three(user, 10_300, model="small"))
        r = call("llm", *self.three(user, 0, model="small"))
        if time.monotonic() - start < 1.5:  # else the debt may be paid already
            self.assertEqual(r.overall_code, OVER)
        # 300 tokens at 6 ms: paid 1.8 s after the charge, not at the next minute.
        time.sleep(max(0.0, 2.0 - (time.monotonic() - start)))
        r = call("llm", *self.three(user, 0, model="small"))
        self.assertEqual(r.overall_code, OK)
        self.assertEqual(r.statuses[1].current_limit.name, "model_tokens")

    def test_a_charge_never_goes_past_one_burst_of_debt(self):
        user = "py-" + uuid.uuid4().hex[:10]
        # 50,000 tokens: the user owes at most one burst (10,000); the rest is not counted.
        done = call("llm", desc(("user", user), hits=50_000))
        self.assertEqual(codes(done), [(OVER, 0)])
        r = call("llm", desc(("user", user), hits=0))
        self.assertIn(r.statuses[0].duration_until_reset.seconds, (119, 120))


if __name__ == "__main__":
    unittest.main()
