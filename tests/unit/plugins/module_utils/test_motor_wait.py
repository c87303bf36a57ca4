"""Unit tests of plugins/module_utils/motor_wait.py and plugins/module_utils/motor_health.py, with a fake HTTP getter and
clock (the real endpoints are exercised by the integration tests and molecule)."""

from __future__ import annotations

import pytest

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_health as mh
from ansible_collections.pymotor.ascend.plugins.module_utils import motor_wait as mw
from ansible_collections.pymotor.ascend.tests.unit.local_http import local_server


@pytest.mark.parametrize("until, status, body, expected, met", [
    ("answers", -1, None, None, False),
    ("answers", 503, None, None, True),
    ("answers", 404, {"x": 1}, None, True),
    ("ready", 503, {"ready": False}, None, False),
    ("ready", 200, {"ready": True}, None, True),
    ("ready", 200, {"ready": "true"}, None, False),
    ("status_ok", 200, {"status": "normal"}, None, True),
    ("status_ok", 200, {"status": True}, None, True),
    ("status_ok", 503, {"status": "normal"}, None, False),
    ("status_ok", 200, {"status": "abnormal"}, None, False),
    ("endpoints", 200, {"services": [{"Endpoint": "tcp://a:1"}, {"Endpoint": "tcp://b:2"}]}, ["tcp://a:1"], True),
    ("endpoints", 200, {"services": [{"Endpoint": "tcp://a:1"}]}, ["tcp://a:1", "tcp://b:2"], False),
    ("endpoints", 200, {"services": None}, [], True),
    ("endpoints", -1, None, [], False),
    # a pod of a multi-pod instance: 2 of its 4 possible endpoints (DP ranks in registration order)
    ("endpoints", 200, {"services": [{"Endpoint": "tcp://a:3"}, {"Endpoint": "tcp://a:4"}]},
     [{"container": "p0-1", "need": 2, "of": ["tcp://a:1", "tcp://a:2", "tcp://a:3", "tcp://a:4"]}], True),
    ("endpoints", 200, {"services": [{"Endpoint": "tcp://a:3"}, {"Endpoint": "tcp://b:4"}]},
     [{"container": "p0-1", "need": 2, "of": ["tcp://a:1", "tcp://a:2", "tcp://a:3", "tcp://a:4"]}], False),
])
def test_condition_met(until, status, body, expected, met):
    assert mh.condition_met(until, status, body, expected) is met


def test_unknown_condition_is_an_error():
    with pytest.raises(ValueError, match="unknown condition"):
        mh.condition_met("soon", 200, {}, None)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def scripted(answers):
    """A getter returning the answers in order (the last one forever)."""
    seen = []

    def get(url, request_timeout, tls=None):
        seen.append(url)
        return answers[min(len(seen), len(answers)) - 1]
    return get, seen


def test_wait_polls_until_the_condition_holds():
    clock = Clock()
    get, seen = scripted([(-1, None, "refused"), (503, {"ready": False}, "{}"), (200, {"ready": True}, "{}")])
    held, polls, seconds, answer = mw.wait_for({"url": "http://c/readiness", "until": "ready", "timeout": 10},
                                               0.5, 5, get=get, clock=clock, sleep=clock.sleep)
    assert (held, polls, seconds, answer) == (True, 3, 1.0, "")


def test_wait_times_out_with_the_last_answer():
    clock = Clock()
    get, seen = scripted([(200, {"services": [{"Endpoint": "tcp://a:1"}]}, '{"services": [...]}')])
    held, polls, seconds, answer = mw.wait_for(
        {"url": "http://k/services", "until": "endpoints", "endpoints": ["tcp://a:1", "tcp://b:2"], "timeout": 3},
        0.5, 5, get=get, clock=clock, sleep=clock.sleep)
    assert held is False and polls == 7 and seconds == 3.0  # polls at 0, 0.5 ... 3.0 s
    assert answer.startswith("HTTP 200") and answer.endswith("missing tcp://b:2")


def test_no_answer_is_reported_as_such():
    clock = Clock()
    get, dummy = scripted([(-1, None, "[Errno 111] Connection refused")])
    held, dummy, dummy, answer = mw.wait_for({"url": "u", "until": "answers", "timeout": 1}, 0.5, 5,
                                             get=get, clock=clock, sleep=clock.sleep)
    assert held is False and answer == "no answer ([Errno 111] Connection refused)"


def test_get_reads_http_errors_and_refusals():
    status, body, text = mw.get_answer("http://127.0.0.1:9/none", 1)
    assert status == -1 and body is None and text


@pytest.fixture()
def http_server():
    """A local HTTP server: /ready answers JSON, /busy 503 with text, /moved a redirect; it records the paths."""
    seen = []

    def answer(_method, path, _headers, _body):
        seen.append(path)
        return {"/ready?full=1": (200, b'{"ready": true}', {}), "/busy": (503, b"warming up", {}),
                "/moved": (302, b"", {"Location": "/ready?full=1"})}.get(path, (404, b"", {}))

    with local_server(answer) as base:
        yield base, seen


def test_get_answers_status_json_and_text_and_follows_no_redirect(http_server):
    base, seen = http_server
    assert mw.get_answer(base + "/ready?full=1", 2) == (200, {"ready": True}, '{"ready": true}')
    assert mw.get_answer(base + "/busy", 2) == (503, None, "warming up")
    assert mw.get_answer(base + "/moved", 2)[0] == 302
    assert seen == ["/ready?full=1", "/busy", "/moved"]


def test_an_untrusted_https_server_is_no_answer(http_server):
    """https against a server that does not speak TLS (or is not trusted) is 'no answer', never an exception."""
    base, dummy = http_server
    status, body, text = mw.get_answer(base.replace("http://", "https://") + "/ready", 2, {"ca_file": ""})
    assert status == -1 and body is None and text


def test_run_checks_polls_every_check_until_all_hold_and_lists_every_failing_one():
    """One wait for all checks: a check that held is not asked again; when one runs out of its own time the wait
    fails once, naming every check that does not hold with its host and last answer."""
    clock = Clock()
    table = {"http://c/readiness": lambda now: (200, {"ready": True}, "{}") if now >= 1 else (503, {"ready": False}, "{}"),
             "http://k/services": lambda now: (200, {}, "{}"),
             "http://10.0.0.7:1026/status": refused}
    get, calls = answering(table, clock)
    params = {"interval": 0.5, "request_timeout": 5, "concurrency": 4, "checks": [
        {"name": "coordinator", "url": "http://c/readiness", "until": "ready", "timeout": 10, "waiting_for": ["coordinator"]},
        {"name": "conductor", "url": "http://k/services", "until": "endpoints", "timeout": 4,
         "endpoints": ["tcp://a:1"], "waiting_for": ["kv_conductor"], "host": "ctl"},
        {"name": "engine", "url": "http://10.0.0.7:1026/status", "until": "status_ok", "timeout": 10,
         "waiting_for": ["prefill"]}]}
    result = mw.run_checks(params, get=get, clock=clock, sleep=clock.sleep)
    assert calls.count("http://c/readiness") == 3  # at 0, 0.5 and 1 s, then never again
    assert calls.count("http://k/services") == calls.count("http://10.0.0.7:1026/status") == 9  # 0 .. 4 s
    assert result["failed"] and result["check"] == "conductor" and result["checks"] == [
        {"name": "coordinator", "seconds": 1.0, "polls": 3}]
    assert [(f["name"], f["host"], f["timed_out"]) for f in result["failing"]] == [
        ("conductor", "ctl", True), ("engine", "10.0.0.7", False)]
    assert result["failing_hosts"] == ["ctl", "10.0.0.7"] and result["waiting_for"] == ["kv_conductor", "prefill"]
    assert result["msg"] == ('2 checks do not hold (hosts: ctl, 10.0.0.7): "conductor" did not hold within 4 s '
                             '(http://k/services: HTTP 200 {}; missing tcp://a:1); "engine" did not hold yet '
                             '(http://10.0.0.7:1026/status: no answer (refused))')
    alone = mw.run_checks(dict(params, checks=params["checks"][1:2]), get=get, clock=clock, sleep=clock.sleep)
    assert alone["msg"] == '"conductor" did not hold within 4 s (http://k/services: HTTP 200 {}; missing tcp://a:1)'
    assert mw.run_checks(dict(params, checks=params["checks"][:1]), get=get, clock=clock, sleep=clock.sleep) == {
        "changed": False, "checks": [{"name": "coordinator", "seconds": 0.0, "polls": 1}]}


def test_one_deadline_for_the_whole_wait():
    """``deadline`` ends the wait even for checks with longer timeouts of their own."""
    clock = Clock()
    get, dummy = answering({"http://c/readiness": lambda now: (503, {"ready": False}, "{}")}, clock)
    checks = [{"name": "c%d" % i, "url": "http://c/readiness", "until": "ready", "timeout": 1800, "waiting_for": []}
              for i in range(3)]
    result = mw.run_checks({"interval": 1, "request_timeout": 5, "deadline": 30, "checks": checks},
                           get=get, clock=clock, sleep=clock.sleep)
    assert result["failed"] and 29 <= clock() <= 30 and len(result["failing"]) == 3
    assert all(f["timed_out"] for f in result["failing"])


def test_the_action_validates_its_arguments_like_a_module():
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    bad = ArgumentSpecValidator(mw.ARGUMENT_SPEC).validate({"checks": [{"name": "x", "url": "u", "until": "later"}]})
    assert any("later" in message for message in bad.error_messages)
    good = ArgumentSpecValidator(mw.ARGUMENT_SPEC).validate({"checks": [{"name": "x", "url": "u", "until": "ready"}]})
    assert not good.error_messages
    assert good.validated_parameters["checks"][0]["timeout"] == 300 and good.validated_parameters["interval"] == 0.5


def test_missing_endpoints_names_the_pod_and_its_range():
    expected = ["tcp://x:9", {"container": "p0-1", "need": 2, "of": ["tcp://a:1", "tcp://a:2", "tcp://a:3"]}]
    body = {"services": [{"Endpoint": "tcp://a:2"}]}
    assert mh.missing_endpoints(body, expected) == ["tcp://x:9", "p0-1: 1/2 of tcp://a:1..3"]


def refused(now):
    return -1, None, "refused"


STALL = {"instance": "job-d0", "container": "job-d0-0", "node_manager": {"url": "http://h/nm"},
         "engines": [{"url": "http://h/e0"}, {"url": "http://h/e1"}]}


def answering(table, clock):
    """A getter answering per URL from ``table[url](now)`` and counting the requests."""
    calls = []

    def get(url, request_timeout, tls=None):
        calls.append(url)
        return table[url](clock())
    return get, calls


def test_a_pod_whose_node_manager_is_normal_without_engines_stalls_the_wait():
    """The node manager says normal while no engine answers, for stall_timeout seconds in a row: the wait fails at
    once (long before the check's own timeout) and names the instance to restart."""
    clock = Clock()
    table = {"http://c/readiness": lambda now: (503, {"ready": False}, "{}"),
             "http://h/nm": lambda now: (200, {"status": True}, "{}"), "http://h/e0": refused, "http://h/e1": refused}
    get, calls = answering(table, clock)
    watch = mw.StallWatch([STALL], 30, 5, get=get, clock=clock)
    check = {"name": "coordinator", "url": "http://c/readiness", "until": "ready", "timeout": 1800,
             "waiting_for": ["coordinator"]}
    held, polls, seconds, answer = mw.wait_for(check, 0.5, 5, get=get, clock=clock, sleep=clock.sleep, watch=watch)
    assert not held and 30 <= seconds <= 30 + mw.STALL_PROBE_SECONDS + 1
    assert watch.instances() == ["job-d0"]
    assert calls.count("http://h/nm") == int(30 // mw.STALL_PROBE_SECONDS) + 1  # probed every STALL_PROBE_SECONDS

    clock.now = 0.0
    result = mw.run_checks({"checks": [check], "interval": 5, "request_timeout": 5, "stalls": [STALL],
                            "stall_timeout": 0}, get=get, clock=clock, sleep=clock.sleep)
    assert "stalled" not in result and result["msg"].startswith('"coordinator" did not hold within 1800 s')


@pytest.mark.parametrize("node_manager, engine, requests", [
    ((200, {"status": False}, "{}"), (-1, None, "refused"), 1),  # endpoints that are not normal yet: starting
    ((200, {"status": True}, "{}"), (200, {"status": "normal"}, "{}"), 2),  # serving
    ((-1, None, "refused"), (-1, None, "refused"), 20),  # the container is not up: nothing to judge yet
])
def test_a_pod_that_got_its_start_command_or_is_not_up_never_stalls(node_manager, engine, requests):
    """A pod that got its start command is never probed again; one that is not up is, every STALL_PROBE_SECONDS."""
    clock = Clock()
    table = {"http://h/nm": lambda now: node_manager, "http://h/e0": lambda now: engine,
             "http://h/e1": lambda now: engine}
    get, calls = answering(table, clock)
    watch = mw.StallWatch([STALL], 10, 5, get=get, clock=clock)
    for dummy in range(100):
        assert not watch.poll()
        clock.sleep(1)
    assert watch.stalled == [] and len(calls) == requests


def test_a_stall_must_last_in_a_row():
    """A node manager seen normal-without-engines, then not answering (its container restarts), then again: the clock
    starts again."""
    clock = Clock()
    phases = {"http://h/nm": lambda now: (-1, None, "refused") if 20 <= now < 30 else (200, {"status": True}, "{}"),
              "http://h/e0": lambda now: (-1, None, "refused"), "http://h/e1": lambda now: (-1, None, "refused")}
    get, dummy = answering(phases, clock)
    watch = mw.StallWatch([STALL], 25, 5, get=get, clock=clock)
    seen = []
    while not watch.poll():
        clock.sleep(1)
    seen.append(clock())
    assert seen == [55.0]  # stalled from 30 s (after the interruption at 20-30 s), 25 s in a row


def test_run_checks_reports_the_stalled_instances():
    """The watch runs across the checks: the coordinator holds, the conductor waits, and the pod stalls meanwhile."""
    clock = Clock()
    table = {"http://c/readiness": lambda now: (200, {"ready": True}, "{}"),
             "http://k/services": lambda now: (200, {"services": []}, "{}"),
             "http://h/nm": lambda now: (200, {"status": True}, "{}"), "http://h/e0": refused, "http://h/e1": refused}
    get, dummy = answering(table, clock)
    params = {"interval": 0.5, "request_timeout": 5, "stalls": [STALL], "stall_timeout": 40, "checks": [
        {"name": "coordinator", "url": "http://c/readiness", "until": "ready", "timeout": 60, "waiting_for": []},
        {"name": "conductor", "url": "http://k/services", "until": "endpoints", "timeout": 600,
         "endpoints": ["tcp://h:5557"], "waiting_for": ["kv_conductor"]}]}
    result = mw.run_checks(params, get=get, clock=clock, sleep=clock.sleep)
    assert result["failed"] and result["stalled"] == ["job-d0"] and result["check"] == "conductor"
    assert result["checks"] == [{"name": "coordinator", "seconds": 0.0, "polls": 1}]
    assert result["msg"].startswith("the node managers of job-d0-0 report normal while none of their engines answers, "
                                    "for 40 s") and clock() < 60
    assert mw.run_checks(dict(params, stall_timeout=0, checks=params["checks"][:1]), get=get, clock=clock,
                         sleep=clock.sleep) == {"changed": False, "checks": [{"name": "coordinator", "seconds": 0.0,
                                                                              "polls": 1}]}


@pytest.fixture()
def fleet():
    """Local HTTP servers on 127.0.0.1: ``/status`` of each waits (up to 5 s) until ``gather`` requests are in flight
    at once (a barrier) and answers normal, or 503 when they never were; plus a black-holed port (it listens, never
    accepts) and a refused one."""
    import http.server
    import socket
    import threading

    state = {"barrier": None, "in_flight": 0, "most": 0}
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # pylint: disable=invalid-name
            with lock:
                state["in_flight"] += 1
                state["most"] = max(state["most"], state["in_flight"])
            try:
                state["barrier"].wait(timeout=5)
                status, body = 200, b'{"status": "normal"}'
            except threading.BrokenBarrierError:
                status, body = 503, b'{"status": "abnormal"}'
            with lock:
                state["in_flight"] -= 1
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler) for dummy in range(6)]
    for server in servers:
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(0)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    refused_port = closed.getsockname()[1]
    closed.close()

    def gather(count):
        state["barrier"] = threading.Barrier(count)
    yield {"urls": ["http://127.0.0.1:%d/status" % s.server_address[1] for s in servers], "gather": gather,
           "state": state, "hole": "http://127.0.0.1:%d/status" % hole.getsockname()[1],
           "refused": "http://127.0.0.1:%d/status" % refused_port}
    for server in servers:
        server.shutdown()
        server.server_close()
    hole.close()


def _engine_checks(urls, timeout=30):
    return [{"name": "engine %d" % i, "url": url, "until": "status_ok", "timeout": timeout, "waiting_for": ["prefill"],
             "host": "npu-%d" % i} for i, url in enumerate(urls)]


def test_checks_are_polled_concurrently_within_the_bound(fleet):
    """Six endpoints that answer only when three requests are in flight at once: three workers get all of them in
    one round (two barrier rounds of three), never more than three at a time."""
    fleet["gather"](3)
    result = mw.run_checks({"interval": 0.1, "request_timeout": 10, "concurrency": 3,
                            "checks": _engine_checks(fleet["urls"])})
    assert "failed" not in result and [c["polls"] for c in result["checks"]] == [1] * 6
    assert fleet["state"]["most"] == 3


def test_a_dead_host_does_not_hold_up_the_others_and_is_named(fleet):
    """A black-holed and a refused endpoint among answering ones: the others hold in the first round, the wait ends
    at the checks' timeout and names both hosts, each with its last answer."""
    fleet["gather"](1)
    checks = _engine_checks(fleet["urls"][:4] + [fleet["hole"], fleet["refused"]], timeout=2)
    result = mw.run_checks({"interval": 0.2, "request_timeout": 0.5, "concurrency": 8, "checks": checks})
    assert result["failed"] and [c["name"] for c in result["checks"]] == ["engine %d" % i for i in range(4)]
    assert all(c["polls"] == 1 for c in result["checks"])
    assert [(f["name"], f["host"], f["url"]) for f in result["failing"]] == [
        ("engine 4", "npu-4", fleet["hole"]), ("engine 5", "npu-5", fleet["refused"])]
    assert result["failing"][0]["last_answer"].startswith("no answer (") and "timed out" in result["failing"][0]["last_answer"]
    assert "refused" in result["failing"][1]["last_answer"].lower()
    assert result["msg"].startswith("2 checks do not hold (hosts: npu-4, npu-5): ")


def test_stall_probes_run_concurrently():
    """The stall watch judges its pods through the same bounded pool: every pod is probed in each round."""
    clock = Clock()
    table = {"http://h/nm": lambda now: (200, {"status": True}, "{}"), "http://h/e0": refused, "http://h/e1": refused}
    get, calls = answering(table, clock)
    stalls = [dict(STALL, container="job-d0-%d" % i) for i in range(5)]
    with mw.Poller(4) as poller:
        watch = mw.StallWatch(stalls, 10, 5, get=get, clock=clock, poller=poller)
        while not watch.poll():
            clock.sleep(1)
    assert clock() == 10 and len(watch.stalled) == 5 and watch.instances() == ["job-d0"]
    assert calls.count("http://h/nm") == 5 * 3  # at 0, 5 and 10 s


def test_reads_get_every_target_once_concurrently_in_verifys_shape(fleet):
    """verify's observations: every target of every group read once (three at a time here: the barrier of three
    releases only then), answers as verify judges them, a black-holed and a refused target as status -1 with why."""
    fleet["gather"](3)
    reads = {"node_managers": {"p0": {"url": fleet["urls"][0]}, "d0": {"url": fleet["urls"][1], "tls": None}},
             "engines": {"p0/0": {"url": fleet["urls"][2]}},
             "dead": {"hole": {"url": fleet["hole"]}, "refused": {"url": fleet["refused"]}},
             "none": {}}
    answers = mw.read_all(reads, 1, 3)
    assert answers["node_managers"] == {"p0": {"status": 200, "json": {"status": "normal"}, "error": ""},
                                        "d0": {"status": 200, "json": {"status": "normal"}, "error": ""}}
    assert answers["engines"]["p0/0"]["status"] == 200 and answers["none"] == {}
    assert [(a["status"], a["json"], bool(a["error"])) for a in answers["dead"].values()] == [(-1, {}, True)] * 2
    assert fleet["state"]["most"] == 3
    with pytest.raises(ValueError, match="reads.engines.x: a target needs a url"):
        mw.read_all({"engines": {"x": {"tls": None}}}, 1, 3)


def test_a_wait_on_engines_that_load_for_90_s_prints_progress_at_least_every_30_s():
    """The readiness wait of a deploy: the control plane answers at once, the engines only after 90 s of model load.
    The wait prints a plain progress line at least every 30 s: how long, what is ready, what is not, time left."""
    clock = Clock()

    def loading(now):
        return (200, {"status": "normal"}, "{}") if now >= 90 else (-1, None, "connection refused")
    get, dummy = answering({"http://ctl/readiness": lambda now: (200, {"ready": True}, "{}"),
                            "http://h1:1026/status": loading, "http://h2:1026/status": loading}, clock)
    checks = [{"name": "controller", "url": "http://ctl/readiness", "until": "ready", "timeout": 1800},
              {"name": "p0 engine", "url": "http://h1:1026/status", "until": "status_ok", "timeout": 1800},
              {"name": "d0 engine", "url": "http://h2:1026/status", "until": "status_ok", "timeout": 1800}]
    lines, said = [], []

    def progress(line):
        lines.append(line)
        said.append(clock())
    params = {"interval": 0.5, "request_timeout": 5, "checks": checks}
    result = mw.run_checks(params, get=get, clock=clock, sleep=clock.sleep, progress=progress)
    assert not result.get("failed") and len(result["checks"]) == 3
    assert len(lines) >= 3
    gaps = [b - a for a, b in zip([0.0] + said, said + [clock()])]
    assert max(gaps) <= 30, gaps
    assert lines[0] == ("waiting 20 s: ready 1/3 (controller); not ready: p0 engine, d0 engine (p0 engine: no answer "
                        "(connection refused)); 1780 s left")
    assert all("\n" not in line for line in lines)
    # no line for a wait that is over before the first one is due
    lines.clear()
    mw.run_checks(dict(params, checks=checks[:1]), get=get, clock=clock, sleep=clock.sleep, progress=progress)
    assert lines == []
