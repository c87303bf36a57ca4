# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The message of a readiness wait that failed (pure): the condition, its likely cause and the fix, then a short,
de-duplicated tail of each container's log (at most ``limit`` lines, each cut to ``width`` characters)."""

from __future__ import annotations

LINE_WIDTH = 300
LINE_LIMIT = 20

# Per condition of a motor_wait check: what did not hold, the likely causes, the fix.
DIAGNOSES = {
    "answers": ("the controller's API port does not answer",
                "the controller container exited or restarts in a loop (a config error, or the port is taken), "
                "or the control host is not reachable from the Ansible controller on motor_host_ip",
                "read the controller log below; `docker ps -a --filter label=io.pymotor.job=<job>` on the control "
                "host shows whether it restarts"),
    "ready": ("the coordinator does not report ready (no prefill/union instance assembled)",
              "an engine is still loading the model, or an engine / node manager failed (NPU busy or missing, "
              "weights not mounted) so its instance never registered with the controller; or the coordinator "
              "restarted and upstream's controller did not re-send its instances (it re-sends only with a prefill "
              "instance: PD hybrid), which the controller's healer repairs by restarting the controller",
              "if the engine logs below show loading progress, raise motor_service_ready_timeout; if the engines "
              "serve, look for 'motor-healer:' in `docker logs <job>-controller` (it acts after 40 s, with backoff); "
              "otherwise fix the error they show and re-run the deploy"),
    "status_ok": ("a node manager or an engine endpoint does not report normal",
                  "its engine processes failed to start or crashed (NPU busy, weights missing, port taken), or the "
                  "controller never started them (upstream race: the node manager registered before its port "
                  "listened and was dropped)",
                  "fix the error in the engine log below and re-run the deploy; a pod whose engine never started "
                  "(no engine lines below) is restarted by the deploy after motor_service_stall_timeout, or "
                  "recovers with `docker restart <container>`"),
    "endpoints": ("the KV conductor does not list every prefill/union DP rank",
                  "PyMotor's coordinator registers each rank with the conductor once, when the instance is added; "
                  "<job>-kv-watcher restores only ranks it saw registered: one the conductor never took (not "
                  "listening then, another port, subscription refused) stays unregistered",
                  "read `docker logs <job>-kv-watcher` and the conductor's log ('HTTP server listening', 'Failed "
                  "to subscribe'), then `docker restart <job>-coordinator`: it registers every rank again"),
}
# A wait stopped by stalled engine pods (motor_wait's ``stalled``) after the deploy restarted them once already.
STALLED = ("engine pods stalled again after their restart: their node managers report normal while no engine "
           "answers (no start command came)",
           "the controller dropped them again (upstream race under heavy load: the node manager registers before "
           "its port listens), or the controller cannot reach the node managers on their pod IPs",
           "check the controller log for 'is not alive for instance' and that the control host reaches the engine "
           "hosts' node manager ports, then re-run the deploy")
TLS_HINT = ("TLS: the endpoint refused the handshake or its certificate; check that the CA / cert / key files the "
            "tls_config section names exist on the Ansible controller and match the servers' certificates")


def tail_lines(text, limit=LINE_LIMIT, width=LINE_WIDTH):
    """The last ``limit`` distinct lines of a log (a line repeated later keeps only its last occurrence), each
    cut to ``width`` characters, with a note of how many were left out."""
    lines = [ln.rstrip() for ln in (text or "").splitlines() if ln.strip()]
    seen, kept = set(), []
    for line in reversed(lines):
        cut = line if len(line) <= width else line[:width - 3] + "..."
        if cut in seen:
            continue
        seen.add(cut)
        kept.append(cut)
        if len(kept) == limit:
            break
    kept.reverse()
    skipped = len(lines) - len(kept)
    return (["(%d earlier or repeated line(s) left out)" % skipped] if skipped > 0 else []) + kept


def not_ready_message(failed, logs, limit=LINE_LIMIT, width=LINE_WIDTH):
    """Lines of the failure message. ``failed``: motor_wait's failed result (``check``, ``until``, ``url``,
    ``last_answer``, ``msg``); ``logs``: ``[{"host", "name", "stdout", "stderr"}]`` (each container once)."""
    failed = failed or {}
    until = failed.get("until") or ""
    condition, cause, fix = STALLED if failed.get("stalled") else DIAGNOSES.get(
        until, ("the readiness check did not hold", "see the log lines below",
                "fix the error the log lines show and re-run the deploy"))
    answer = str(failed.get("last_answer") or failed.get("msg") or "")
    answer = answer if len(answer) <= width else answer[:width - 3] + "..."
    if "CERTIFICATE" in answer.upper() or "SSL" in answer.upper() or "TLS" in answer.upper():
        cause = TLS_HINT + "; or " + cause
    how = "was stopped" if failed.get("stalled") else "did not succeed within its timeout"
    lines = ['readiness: "%s" %s: %s' % (failed.get("check") or "?", how, condition),
             "url: %s; last answer: %s" % (failed.get("url") or "?", answer or "none"),
             "likely cause: %s" % cause,
             "fix: %s" % fix]
    others = (failed.get("failing") or [])[1:]  # motor_wait lists every check that did not hold, the first above
    for other in others[:limit]:
        text = str(other.get("last_answer") or "")
        lines.append(('also not holding: "%s" on %s: %s' % (other.get("name") or "?", other.get("host") or "?",
                                                            text or "none"))[:width])
    if len(others) > limit:
        lines.append("and %d more checks that did not hold, on %s" % (len(others) - limit, ", ".join(
            dict.fromkeys(str(o.get("host") or "?") for o in others[limit:]))))
    done = set()
    for entry in logs or []:
        key = (entry.get("host"), entry.get("name"))
        if key in done:
            continue
        done.add(key)
        text = "\n".join(part for part in (entry.get("stdout"), entry.get("stderr")) if part)
        lines.append("----- %s/%s (last log lines)" % key)
        lines.extend(tail_lines(text, limit, width) or ["(no log output)"])
    return lines


TIMED_OUT = "(no answer within motor_service_log_timeout: the Docker engine of the host did not answer)"


def readiness_failure(failed, results, limit=LINE_LIMIT, width=LINE_WIDTH):
    """``not_ready_message`` from the results of the ``docker logs`` command loop (items: name and host; an item
    that failed, e.g. at its deadline on a host that stopped answering, shows its message)."""
    logs = [{"host": (r.get("item") or {}).get("host"), "name": (r.get("item") or {}).get("name"),
             "stdout": r.get("stdout") or "",
             "stderr": r.get("stderr") or (r.get("msg") if r.get("failed") else "")
             or (TIMED_OUT if r.get("rc") == 124 and not r.get("stdout") else "")} for r in results or []]
    return not_ready_message(failed, logs, int(limit), int(width))
