"""Unit tests of the pure parts of plugins/modules/motor_host_probe.py (npu-smi parsing, /proc/net/tcp reading, model
and disk checks); the module itself runs on every simulated host in the integration tests and molecule."""

from __future__ import annotations

from ansible_collections.pymotor.ascend.plugins.modules import motor_host_probe as mp

# npu-smi 24.1 on an Atlas 800I A2 (as the simulated hosts print it), NPU 2 marked Warning
MAPPING = """\
        NPU ID                         Chip ID                        Chip Logic ID                  Chip Name
        0                              0                              0                              Ascend 910B4
        0                              1                              -                              Mcu
        1                              0                              1                              Ascend 910B4
        1                              1                              -                              Mcu
        2                              0                              2                              Ascend 910B4
"""
INFO = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 24.1.0.3                 Version: 24.1.0.3                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B4               | OK            | 90.0        40                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          2871 / 32768         |
+===========================+===============+====================================================+
| 1     910B4               | OK            | 93.7        41                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          2884 / 32768         |
+===========================+===============+====================================================+
| 2     910B4               | Warning       | 96.4        42                0    / 0             |
| 0                         | 0000:81:00.0  | 0           0    / 0          2897 / 32768         |
+===========================+===============+====================================================+
"""


def test_parse_npu_smi_maps_chips_to_device_ids_with_their_health():
    assert mp.parse_npu_smi(MAPPING, INFO) == {"0": "OK", "1": "OK", "2": "Warning"}


def test_parse_npu_smi_of_nothing_is_empty():
    assert mp.parse_npu_smi("", "") == {}


def test_listening_ports_reads_only_listen_sockets(tmp_path):
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000:0BD2 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n"
        "   1: 0100007F:07EA 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2\n"
        "   2: 0100007F:9C40 0100007F:07EA 01 00000000:00000000 00:00000000 00000000     0        0 3\n")
    assert mp.listening_ports((str(table), str(tmp_path / "absent"))) == [2026, 3026]


def test_model_states_and_free_space(tmp_path):
    ok = tmp_path / "ok"
    ok.mkdir()
    (ok / "config.json").write_text("{}")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert mp.model_states([str(ok), str(empty), str(tmp_path / "gone")]) == {
        str(ok): "ok", str(empty): "no config.json", str(tmp_path / "gone"): "missing"}
    # a path that does not exist yet is measured at its nearest existing parent (other writers may move it a bit)
    assert abs(mp.free_mb(str(tmp_path / "not" / "yet")) - mp.free_mb(str(tmp_path))) < 512 and mp.free_mb(str(tmp_path)) > 0


def test_link_states_without_the_tool():
    assert mp.link_states([0, 1], "/nonexistent/hccn_tool") == {"0": "hccn_tool not found", "1": "hccn_tool not found"}
