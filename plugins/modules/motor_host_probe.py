#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2025, pymotor.ascend contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt): modules follow Ansible's module
# licence; the rest of the collection is Apache-2.0.
# SPDX-License-Identifier: GPL-3.0-or-later
"""Read everything a PyMotor deploy needs to know about a host, read-only, in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: motor_host_probe
short_description: Read the Docker engine, the job's containers and the Ascend surface of a host in one run
version_added: 1.0.0
author: pymotor.ascend contributors (@pymotor-ascend)
description:
  - Read-only. Runs before planning (the containers' labels tell the plan where they run), so it reads the
    whole host rather than what a plan would use - every NPU C(npu-smi) lists and its health, every listening TCP
    port, the link state of every NPU (when asked), the given paths and model directories, the free disk space;
    the precheck then judges the planned NPUs, ports and paths on the controller without another round trip.
  - The Docker part goes through the collection's own Engine API client (Python standard library only, honouring
    O(docker_host) and the TLS options); when the engine does not answer,
    the module still succeeds with RV(can_talk_to_docker=false) and the reason in RV(msg), so that the precheck
    reports it with the host's other problems.
  - The containers are listed as the Engine API lists them (C(GET /containers/json)) (C(Names), C(State),
    C(Status), C(Labels), ...), filtered by the label C(io.pymotor.job).
extends_documentation_fragment:
  - pymotor.ascend.docker
  - pymotor.ascend.read_only
options:
  job_id:
    description: Value of the C(io.pymotor.job) label of the containers to list.
    type: str
    required: true
  image:
    description: Image whose id is returned in RV(images) (empty - no image lookup).
    type: str
    default: ''
  paths:
    description: Paths whose existence is returned in RV(paths).
    type: list
    elements: path
    default: []
  model_dirs:
    description: Model directories checked for a C(config.json) (RV(models)).
    type: list
    elements: path
    default: []
  links:
    description:
      - Read the NPU network of every NPU with C(hccn_tool -i <id> -link -g) (RV(links)), C(-ip -g) and C(-tls -g)
        (RV(npu_network)); read-only queries.
    type: bool
    default: false
  hccn_tool:
    description: Path of C(hccn_tool).
    type: path
    default: /usr/local/Ascend/driver/tools/hccn_tool
  driver_dir:
    description: The Ascend driver directory; its C(version.info) and the firmware's (C(../firmware/version.info))
      are returned in RV(versions).
    type: path
    default: /usr/local/Ascend/driver
  disk_path:
    description: Path whose file system's free space is returned in RV(free_mb) (its nearest existing parent).
    type: path
    default: /var/log
  inspect:
    description: Also inspect every container of the job (RV(inspections)); C(verify.yml) reads the containers here.
    type: bool
    default: false
notes:
  - C(npu-smi) is looked up in E(PATH), /usr/local/sbin and /usr/local/bin.
  - The network interfaces (RV(interfaces), RV(default_interface)) come from C(ip -j addr) when C(ip) is installed,
    else from the standard library (C(socket.if_nameindex), the C(SIOCGIFADDR) ioctl for the primary IPv4 address
    only, C(/proc/net/if_inet6)); the default route from C(/proc/net/route). No package is needed on the host.
seealso:
  - module: pymotor.ascend.motor_job_info
"""

EXAMPLES = r"""
- name: Read the host before planning
  pymotor.ascend.motor_host_probe:
    job_id: mindie-motor
    image: pymotor:latest
    paths: [/usr/local/Ascend/driver, /mnt/weight]
    model_dirs: [/mnt/weight/qwen3_8B]
  register: host
"""

RETURN = r"""
can_talk_to_docker:
  description: Whether the Docker engine answered.
  returned: always
  type: bool
  sample: true
msg:
  description: Why the Docker engine could not be read (when RV(can_talk_to_docker) is false).
  returned: when the Docker engine does not answer
  type: str
  sample: 'cannot talk to the Docker engine at unix:///var/run/docker.sock: FileNotFoundError: [Errno 2] No such file or directory'
host_info:
  description: C(ServerVersion) of the Docker engine.
  returned: always
  type: dict
  sample: {ServerVersion: 27.5.1}
images:
  description: C([{Id}]) of O(image) when it is present.
  returned: always
  type: list
  elements: dict
  sample: [{Id: 'sha256:0123abcd', Labels: {}}]
containers:
  description: The containers of the job (running or not), as the Engine API lists them.
  returned: always
  type: list
  elements: dict
  sample: [{Id: 3f2a9c0e1b7d, Names: [/mindie-motor-p0-0], State: running, Status: Up 5 minutes, Labels: {io.pymotor.job: mindie-motor}}]
inspections:
  description: C(Id), C(Name), C(Image), C(RestartCount) and C(State) of the inspection (C(GET /containers/{id}/json))
    of every container of the job, with O(inspect).
  returned: when O(inspect) is true and the Docker engine answers
  type: list
  elements: dict
  sample: [{Name: /mindie-motor-p0-0, Image: 'sha256:0123abcd', RestartCount: 0, State: {Running: true, Status: running}}]
npu_devices:
  description: Ids of the C(/dev/davinciN) device nodes.
  returned: always
  type: list
  elements: int
  sample: [0, 1, 2, 3, 4, 5, 6, 7]
npu_health:
  description: NPU (device) id to the health C(npu-smi info) reports.
  returned: always
  type: dict
  sample: {'0': OK, '1': OK, '2': Warning}
npu_spod:
  description:
    - Device id to its super device id (C(sdid)) from C(npu-smi info -t spod-info -i <id // 2> -c <id % 2>), or
      C(sdid) empty and the tool's C(error); read only where C(npu-smi info -m) lists two Ascend dies per NPU (A3).
  returned: always
  type: dict
  sample: {'0': {sdid: '0'}, '1': {sdid: '', error: 'Error: the device does not exist.'}}
npu_error:
  description: Why C(npu-smi) could not be read (empty when it could, or when there is no NPU device).
  returned: always
  type: str
  sample: ''
listening:
  description: Every TCP port in LISTEN state (IPv4 and IPv6).
  returned: always
  type: list
  elements: int
  sample: [22, 1025, 2379]
links:
  description: NPU id to its link state (C(UP), C(DOWN), or the tool's error), with O(links).
  returned: always
  type: dict
  sample: {'0': UP, '1': DOWN}
npu_network:
  description: NPU id to its device address (C(ip), empty when none) and TLS switch (C(tls)) as C(hccn_tool) reports
    them, with C(error) when the address could not be read; with O(links).
  returned: always
  type: dict
  sample: {'0': {ip: 29.1.0.1, tls: '0'}, '1': {ip: '', tls: '0', error: 'ipaddr not configured'}}
versions:
  description: The driver's and the firmware's C(version.info) (key to value), on a host with NPU devices.
  returned: always
  type: dict
  sample: {driver: {Version: 24.1.0.3, compatible_version_fw: '[7.0.0,7.5.99]'}, firmware: {Version: 7.5.0.3.220}}
npu_topo:
  description: The CPU affinity of every NPU from C(npu-smi info -t topo) (C(cpus), NPU id to CPU list), the host's
    online CPUs (C(online), C(/sys/devices/system/cpu/online)) and why the topology could not be read (C(error)), on a
    host with NPU devices.
  returned: always
  type: dict
  sample: {cpus: {'0': 144-167, '1': 144-167, '2': 96-119}, online: 0-191, error: ''}
device_nodes:
  description: The NPU management devices and C(/dev/infiniband) to whether they exist, on a host with NPU devices.
  returned: always
  type: dict
  sample: {/dev/davinci_manager: true, /dev/devmm_svm: true, /dev/hisi_hdc: true, /dev/infiniband: false}
euid:
  description: The effective user id the probe ran as; not 0 means a connection without C(become), and the prechecks
    that read what only root may (Docker socket, C(npu-smi), C(hccn_tool), the driver) are skipped for one problem
    that says so.
  returned: always
  type: int
  sample: 0
local_ports:
  description: The kernel's ephemeral port range (C(net.ipv4.ip_local_port_range)) and its reserved ports
    (C(net.ipv4.ip_local_reserved_ports)).
  returned: always
  type: dict
  sample: {range: ['32768', '60999'], reserved: ''}
paths:
  description: Path to whether it exists.
  returned: always
  type: dict
  sample: {/usr/local/Ascend/driver: true, /mnt/weight: true}
models:
  description: Model directory to C(ok), C(missing) or C(no config.json).
  returned: always
  type: dict
  sample: {/mnt/weight/qwen3_8B: ok, /mnt/weight/other: no config.json}
free_mb:
  description: Free MiB on the file system of O(disk_path).
  returned: always
  type: int
  sample: 51200
interfaces:
  description:
    - Every network interface of the host (the host's network namespace) with its addresses, C(lo) included.
    - The plan takes C(motor_nic) and C(motor_host_ip) from RV(default_interface) when the inventory does not set
      them; the precheck checks that a set C(motor_nic) is one of these and C(motor_host_ip) one of their addresses.
  returned: always
  type: dict
  sample: {lo: {ipv4: [127.0.0.1], ipv6: ['::1']}, enp189s0f0: {ipv4: [10.20.0.11], ipv6: []}}
default_interface:
  description: The interface of the IPv4 default route (the one with the lowest metric; empty when there is none).
  returned: always
  type: str
  sample: enp189s0f0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.pymotor.ascend.plugins.module_utils.motor_arguments import (
    DOCKER_CONNECTION_REQUIRED_TOGETHER,
    HOST_PROBE_ARGUMENT_SPEC,
)
from ansible_collections.pymotor.ascend.plugins.module_utils.motor_host_probe import probe


def main():
    # The action plugin runs probe() as a standard-library script; this path serves connections without pipelining.
    module = AnsibleModule(argument_spec=HOST_PROBE_ARGUMENT_SPEC, supports_check_mode=True,
                           required_together=DOCKER_CONNECTION_REQUIRED_TOGETHER)
    module.exit_json(**probe(module.params))


if __name__ == "__main__":
    main()
