"""Unit tests of plugins/plugin_utils/reconcile/not_ready.py: the message of a failed readiness wait."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.plugin_utils.reconcile.not_ready import (
    DIAGNOSES,
    not_ready_message,
    readiness_failure,
    tail_lines,
)


def test_tail_keeps_the_last_distinct_lines_cut_to_width():
    log = "\n".join(["start"] + ["heartbeat ok"] * 50 + ["x" * 5000] + ["line %d" % i for i in range(30)])
    got = tail_lines(log, limit=20, width=300)
    assert got[0] == "(62 earlier or repeated line(s) left out)"
    assert got[1:] == ["line %d" % i for i in range(10, 30)]
    short = tail_lines("a\nb\na\n" + "y" * 400, limit=20, width=300)
    assert short == ["(1 earlier or repeated line(s) left out)", "b", "a", "y" * 297 + "..."]


def test_message_names_condition_cause_fix_then_each_container_once():
    failed = {"check": "the KV conductor lists every prefill/union DP rank", "until": "endpoints",
              "url": "http://10.0.0.2:13333/services", "last_answer": "HTTP 200 {...}; missing tcp://10.0.0.1:5558"}
    item = {"host": "ctl", "name": "j-kv-conductor"}
    results = [{"item": item, "stdout": "\n".join("request body %d %s" % (i, "z" * 900) for i in range(100)), "stderr": ""},
               {"item": item, "stdout": "again", "stderr": ""}]
    lines = readiness_failure(failed, results, 20)
    assert lines[0].startswith('readiness: "the KV conductor lists every prefill/union DP rank" did not succeed')
    assert "missing tcp://10.0.0.1:5558" in lines[1]
    assert lines[2].startswith("likely cause: PyMotor's coordinator registers each rank with the conductor once")
    assert lines[3].startswith("fix: read `docker logs <job>-kv-watcher`")
    assert [ln for ln in lines if ln.startswith("-----")] == ["----- ctl/j-kv-conductor (last log lines)"]
    assert len(lines) == 4 + 1 + 21 and all(len(ln) <= 300 for ln in lines)


def test_tls_errors_point_at_the_tls_files():
    failed = {"check": "the controller port answers", "until": "answers", "url": "https://c:2026/readiness",
              "last_answer": "no answer (<urlopen error [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed>)"}
    lines = readiness_failure(failed, [], 20)
    assert lines[2].startswith("likely cause: TLS: the endpoint refused the handshake or its certificate")


def test_pods_that_stall_again_after_their_restart_are_named_as_such():
    failed = {"check": "the coordinator reports ready", "until": "ready", "url": "http://c:1026/readiness",
              "last_answer": "HTTP 200 {\"ready\": false}", "stalled": ["j-d0"]}
    lines = readiness_failure(failed, [], 20)
    assert lines[0] == ('readiness: "the coordinator reports ready" was stopped: engine pods stalled again after their '
                        'restart: their node managers report normal while no engine answers (no start command came)')
    assert lines[2].startswith("likely cause: the controller dropped them again")
    assert "is not alive for instance" in lines[3]


def test_every_failing_check_is_named_with_its_host():
    """motor_wait lists every check that did not hold: the message names the first as before, then the others with
    their hosts (at most ``limit``, then the hosts of the rest)."""
    failing = [{"name": "engine %d" % i, "host": "npu-%d" % i, "last_answer": "no answer (timed out)"}
               for i in range(5)]
    failed = {"check": "engine 0", "until": "status_ok", "url": "http://10.0.0.1:1026/status",
              "last_answer": "no answer (timed out)", "failing": failing}
    lines = not_ready_message(failed, [], limit=2)
    assert lines[0] == 'readiness: "engine 0" did not succeed within its timeout: ' + DIAGNOSES["status_ok"][0]
    assert lines[4:] == ['also not holding: "engine 1" on npu-1: no answer (timed out)',
                         'also not holding: "engine 2" on npu-2: no answer (timed out)',
                         "and 2 more checks that did not hold, on npu-3, npu-4"]


def test_a_log_read_that_reached_its_deadline_shows_why_in_place_of_the_log():
    failed = {"check": "the controller port answers", "until": "answers", "url": "http://c:2026/readiness",
              "last_answer": "no answer (timed out)"}
    results = [{"item": {"host": "h2", "name": "j-p0-0"}, "failed": True,
                "msg": "The command action failed to execute in the expected time frame (30) and was terminated"},
               {"item": {"host": "h1", "name": "j-p0-1"}, "stdout": "", "stderr": "", "rc": 124}]
    lines = readiness_failure(failed, results, 20)
    at = lines.index("----- h2/j-p0-0 (last log lines)")
    assert lines[at + 1].startswith("The command action failed to execute in the expected time frame (30)")
    assert lines[lines.index("----- h1/j-p0-1 (last log lines)") + 1].startswith("(no answer within motor_service_log")
