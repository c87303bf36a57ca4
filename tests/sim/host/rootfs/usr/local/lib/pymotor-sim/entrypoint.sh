#!/bin/sh
# Simulated Ascend host start-up: make the NPU device nodes for $SIM_HARDWARE, render npu-smi,
# hccn_tool and /etc/hccn.conf for this host, then run dockerd (started again whenever it exits) until SIGTERM.
set -eu

LIB=/usr/local/lib/pymotor-sim

log() { echo "[sim-host] $*"; }

npu_count() {
  case $SIM_HARDWARE in
    800I_A2) echo 8 ;;
    800I_A3) echo 16 ;;
    # Atlas A5 (PyMotor's HARDWARE_TYPE_950I_A5) with one chip per card (schedule policy chip1-node<N>)
    350-Atlas-8) echo 8 ;;
    350-Atlas-16) echo 16 ;;
    none) echo 0 ;;
    *) echo "[sim-host] unknown SIM_HARDWARE=$SIM_HARDWARE (800I_A2, 800I_A3, 350-Atlas-8, 350-Atlas-16 or none)" >&2
       exit 2 ;;
  esac
}

# Stand-in nodes use the null device's numbers, which Docker's default device rules allow in
# nested containers, so "--device /dev/davinciN:...:rwm" works and is writable there.
make_node() { [ -e "$1" ] || mknod -m 666 "$1" c 1 3; }

make_devices() {
  i=0
  while [ "$i" -lt "$1" ]; do make_node "/dev/davinci$i"; i=$((i + 1)); done
  for node in davinci_manager devmm_svm hisi_hdc; do make_node "/dev/$node"; done
}

# SIM_NIC: the name of the host's interface. Docker names it eth0; bare-metal Atlas hosts have enp*/bond*. Renaming
# needs CAP_NET_ADMIN (simctl gives every capability); the link goes down for it, which drops the default route.
rename_nic() {
  [ -n "${SIM_NIC:-}" ] && [ "$SIM_NIC" != eth0 ] || return 0
  if ip link show "$SIM_NIC" >/dev/null 2>&1; then return 0; fi
  gateway=$(ip -4 route show default | awk '{print $3; exit}')
  ip link set eth0 down
  ip link set eth0 name "$SIM_NIC"
  ip link set "$SIM_NIC" up
  if [ -n "$gateway" ]; then ip route replace default via "$gateway" dev "$SIM_NIC"; fi
  log "network interface eth0 renamed $SIM_NIC (default route via ${gateway:-none})"
}

# The interface of the IPv4 default route.
default_nic() {
  awk '$2 == "00000000" && $8 == "00000000" { print $1; exit }' /proc/net/route
}

# NPU (RoCE) addresses: 29.<third>.<fourth octet of the default route's interface>.<id+1>, unique per simulated host.
npu_net() {
  ip -4 -o addr show "$(default_nic)" | awk '{split($4, a, "[./]"); print "29." a[3] "." a[4]; exit}'
}

write_hccn_conf() {
  net=$1 i=0
  : >/etc/hccn.conf
  while [ "$i" -lt "$2" ]; do
    cat >>/etc/hccn.conf <<CONF
address_$i=$net.$((i + 1))
netmask_$i=255.255.0.0
netdetect_$i=${net%.*}.0.1
gateway_$i=${net%.*}.0.1
send_arp_status_$i=1
tls_enable_$i=0
CONF
    i=$((i + 1))
  done
}

install_ascend_surface() {
  net=$(npu_net)
  # created here, not only in git: an empty directory is not tracked, so a fresh clone lacks it
  mkdir -p /usr/local/Ascend/driver/tools /usr/local/sbin
  sed "s/@HARDWARE@/$SIM_HARDWARE/" "$LIB/npu-smi.in" >/usr/local/bin/npu-smi
  cp /usr/local/bin/npu-smi /usr/local/sbin/npu-smi
  sed "s/@NPU_NET@/$net/" "$LIB/hccn_tool.in" >/usr/local/Ascend/driver/tools/hccn_tool
  chmod 755 /usr/local/bin/npu-smi /usr/local/sbin/npu-smi /usr/local/Ascend/driver/tools/hccn_tool
  write_hccn_conf "$net" "$1"
}

# A CPU-only control host has no driver, tools or NPU configuration at all.
remove_ascend_surface() {
  rm -rf /usr/local/Ascend /usr/local/dcmi /usr/local/bin/npu-smi /usr/local/sbin/npu-smi \
    /etc/hccn.conf /etc/ascend_install.info
}

# The fault knobs (/etc/pymotor-sim) of a host with NPUs live in the driver directory, which engine containers get
# mounted: npu-smi bind-mounted there reads the same NPU health as on the host (npu-smi.in).
knobs_in_driver() {
  [ -L /etc/pymotor-sim ] && return 0
  mkdir -p /usr/local/Ascend/driver/pymotor-sim
  if [ -d /etc/pymotor-sim ]; then cp -a /etc/pymotor-sim/. /usr/local/Ascend/driver/pymotor-sim/ && rm -rf /etc/pymotor-sim; fi
  ln -s /usr/local/Ascend/driver/pymotor-sim /etc/pymotor-sim
}

count=$(npu_count)
rename_nic
if [ "$count" -gt 0 ]; then knobs_in_driver; fi
mkdir -p /etc/pymotor-sim
echo "$SIM_HARDWARE" >/etc/pymotor-sim/hardware
if [ "$count" -gt 0 ]; then
  make_devices "$count"
  install_ascend_surface "$count"
else
  remove_ascend_surface
fi
log "hardware $SIM_HARDWARE: $count NPU device nodes"

# Nested containers' cgroups live in the machine's cgroupfs (bind-mounted): stop them through
# dockerd, quickly, so none is left behind, then let dockerd exit.
stop_host() {
  docker ps -q | xargs -r docker stop -t 2 >/dev/null 2>&1 || true
  kill -TERM "$dockerd_pid" 2>/dev/null || true
  wait "$dockerd_pid" || true
  exit 0
}

# dockerd is supervised like systemd's Restart=always: when it exits on its own (a crash, or
# "pkill -TERM dockerd" as a Docker engine restart) it is started again; a daemon shutdown stops
# the nested containers without marking them stopped, so "unless-stopped" ones come back with it.
# Only this container's own SIGTERM/SIGINT (stop_host) ends the loop.
dockerd_pid=
trap stop_host TERM INT
: >/var/log/dockerd.log
while :; do
  dockerd >>/var/log/dockerd.log 2>&1 &
  dockerd_pid=$!
  log "dockerd started (pid $dockerd_pid, log /var/log/dockerd.log)"
  rc=0
  wait "$dockerd_pid" || rc=$?
  log "dockerd (pid $dockerd_pid) exited with status $rc: starting it again in 1 s"
  sleep 1
done
