"""Unit tests of the pure parts of plugins/module_utils/motor_host_probe.py (npu-smi parsing, /proc/net/tcp reading,
model and disk checks); the module itself runs on every simulated host in the integration tests and molecule, and
tests/unit/plugins/plugin_utils/test_host_script.py runs it both ways (script and AnsiballZ) on this machine."""

from __future__ import annotations

import json

from ansible_collections.pymotor.ascend.plugins.module_utils import motor_host_probe as mp

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


ROUTE = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
enp189s0f0\t0000140A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
bond1\t00000000\t0107A8C0\t0003\t0\t0\t200\t00000000\t0\t0\t0
enp189s0f0\t00000000\t0100140A\t0003\t0\t0\t100\t00000000\t0\t0\t0
ib0\t00000000\t0100140B\t0002\t0\t0\t50\t00000000\t0\t0\t0
"""


def test_default_route_interface_takes_the_lowest_metric_of_up_default_routes():
    assert mp.default_route_interface(ROUTE) == "enp189s0f0"  # ib0's route is not up (no RTF_UP)
    assert mp.default_route_interface(ROUTE.splitlines()[0] + "\n") == ""
    assert mp.default_route_interface("") == ""


def test_parse_ip_json_reads_every_interface_with_its_addresses():
    text = json.dumps([
        {"ifindex": 1, "ifname": "lo", "addr_info": [{"family": "inet", "local": "127.0.0.1"},
                                                     {"family": "inet6", "local": "::1"}]},
        {"ifindex": 2, "ifname": "enp189s0f0", "link_index": 9,
         "addr_info": [{"family": "inet", "local": "10.20.0.11", "prefixlen": 16},
                       {"family": "inet", "local": "10.20.0.12"}, {"family": "inet6", "local": "FD00:0::1"}]},
        {"ifindex": 3, "ifname": "ib0", "addr_info": []}, {"ifindex": 4}])
    assert mp.parse_ip_json(text) == {"lo": {"ipv4": ["127.0.0.1"], "ipv6": ["::1"]},
                                      "enp189s0f0": {"ipv4": ["10.20.0.11", "10.20.0.12"], "ipv6": ["fd00::1"]},
                                      "ib0": {"ipv4": [], "ipv6": []}}


def test_parse_if_inet6():
    text = ("00000000000000000000000000000001 01 80 10 80       lo\n"
            "fd000000000000000000000000000002 02 40 00 80 enp189s0f0\n")
    assert mp.parse_if_inet6(text) == {"lo": ["::1"], "enp189s0f0": ["fd00::2"]}


def test_read_interfaces_without_ip_uses_the_standard_library(tmp_path):
    route = tmp_path / "route"
    route.write_text(ROUTE)
    interfaces, default = mp.read_interfaces(ip_tool="", route_path=str(route), inet6_path=str(tmp_path / "none"))
    assert default == "enp189s0f0"
    assert interfaces["lo"] == {"ipv4": ["127.0.0.1"], "ipv6": []}


def test_read_interfaces_with_ip_of_this_machine():
    interfaces, dummy = mp.read_interfaces()
    assert "127.0.0.1" in interfaces["lo"]["ipv4"]


# npu-smi on an A3 (two Ascend dies per NPU module, then its MCU), as the simulated hosts print it
A3_MAPPING = """\
        NPU ID                         Chip ID                        Chip Logic ID                  Chip Phy-ID                    Chip Name
        0                              0                              0                              0                              Ascend910
        0                              1                              1                              1                              Ascend910
        0                              2                              -                              -                              Mcu
"""


def test_two_dies_per_npu_tells_an_a3_from_an_a2():
    assert mp.two_dies_per_npu(A3_MAPPING) is True
    assert mp.two_dies_per_npu(MAPPING) is False


def test_parse_spod_takes_the_sdid_line_as_hccl_tools_does():
    text = "        SDID                           : 1048577\n        Super Pod Size                 : 1\n"
    assert mp.parse_spod(text) == "1048577"
    assert mp.parse_spod("Error: the device does not support spod-info.\n") == ""


def test_npu_health_reads_spod_info_per_die_only_on_an_a3(monkeypatch):
    calls = []

    def run(argv):
        calls.append(argv[1:])
        if argv[1:] == ["info", "-m"]:
            return 0, mapping, ""
        if argv[1:] == ["info"]:
            return 0, "", ""
        card, chip = argv[5], argv[7]
        if (card, chip) == ("0", "1"):
            return 1, "", "Error: the device (NPU ID 0, Chip ID 1) does not exist.\n"
        return 0, "        SDID                           : %s%s\n" % (card, chip), ""

    monkeypatch.setattr(mp.shutil, "which", lambda *a, **k: "/usr/local/sbin/npu-smi")
    monkeypatch.setattr(mp, "_run", run)
    mapping = A3_MAPPING
    health, error, spod = mp.npu_health([0, 1, 2])
    assert error == "" and spod == {"0": {"sdid": "00"}, "1": {"sdid": "", "error": "Error: the device (NPU ID 0, "
                                                                                    "Chip ID 1) does not exist."},
                                    "2": {"sdid": "10"}}
    assert ["info", "-t", "spod-info", "-i", "1", "-c", "0"] in calls
    mapping, calls[:] = MAPPING, []
    assert mp.npu_health([0, 1, 2])[2] == {} and all("spod-info" not in c for c in calls)
