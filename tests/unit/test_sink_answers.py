"""A command waits for the sink's answer to a read longer than the engine may spend on it, so a
query that runs too long shows the engine's `Timeout exceeded`, not `did not answer`; a sink
that never answers is still reported, after a bounded wait."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from streams import analytics, query_clients
from streams.analytics import QueryFailed
from streams.query_clients import SinkAddress, SinkUnavailable, post_query

ENGINE_TIMEOUT = "Code: 159. DB::Exception: Timeout exceeded: elapsed 1.0 seconds"


class _SlowSink(BaseHTTPRequestHandler):
    """Answers a read as the sink does when the engine stopped it, `delay` seconds late."""

    delay = 0.0

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        time.sleep(self.delay)
        body = json.dumps({"error": "query_failed", "message": ENGINE_TIMEOUT}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        return


@contextmanager
def _sink(delay: float) -> Iterator[SinkAddress]:
    handler = type("Sink", (_SlowSink,), {"delay": delay})
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield SinkAddress(0, "127.0.0.1", server.server_address[1], "token")
        finally:
            server.shutdown()


@pytest.fixture
def query_limit_of_one_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(analytics.QUERY_SETTINGS, "max_execution_time", 1)
    monkeypatch.setattr(query_clients, "ANSWER_MARGIN_SECONDS", 1.0)


@pytest.mark.usefixtures("query_limit_of_one_second")
def test_given_a_read_the_engine_stopped_at_its_limit_then_its_message_is_shown() -> None:
    """The engine may spend the limit on the check and again on the run: the answer comes
    after more than the limit."""
    with _sink(delay=1.5) as address, pytest.raises(QueryFailed, match="Timeout exceeded"):
        post_query(address, "SELECT count() FROM numbers(1e13)", "clinic-a")


@pytest.mark.usefixtures("query_limit_of_one_second")
def test_given_a_sink_that_does_not_answer_then_the_wait_is_bounded() -> None:
    started = time.monotonic()
    with _sink(delay=60.0) as address:
        with pytest.raises(SinkUnavailable, match="did not answer: timed out"):
            post_query(address, "SELECT 1", "clinic-a")
        assert time.monotonic() - started < 30.0


def test_a_command_waits_for_the_sink_longer_than_the_engine_may_take() -> None:
    assert query_clients.sink_answer_seconds() > 2 * analytics.QUERY_SETTINGS["max_execution_time"]
