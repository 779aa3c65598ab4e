#!/usr/bin/env bash
# Writes the SimGrid platform of the ZeCO paper's cluster to stdout: NODES DGX H100 nodes of 8 GPUs on NVSwitch, each
# GPU its own 400 Gb/s NDR InfiniBand NIC (a rail, 8 a node) into a non-blocking fat tree (DESIGN §10). Hosts are
# the GPUs, gpu-<node>-<i> (node 0..NODES-1, i 0..7). The committed file is NODES = 32 (256 GPUs):
#   scripts/sim_platform_dgx.sh 32 > sim/platforms/dgx-h100.xml
# With --hostfile NODES it prints the hostfile instead, one host a line in rank order (gpu-0-0 ... gpu-0-7,
# gpu-1-0 ...), for smpirun -hostfile (rank r runs on line r):
#   scripts/sim_platform_dgx.sh --hostfile 32 > hosts.txt
set -euo pipefail

usage() {
  echo "usage: $0 NODES > sim/platforms/dgx-h100.xml | $0 --hostfile NODES > HOSTFILE" >&2
  exit 2
}
hostfile=0
if [ "${1:-}" = --hostfile ]; then
  hostfile=1
  shift
fi
[ $# -eq 1 ] || usage
nodes=$1
[[ $nodes =~ ^[1-9][0-9]*$ ]] || usage

if [ $hostfile = 1 ]; then
  for ((n = 0; n < nodes; n++)); do
    for ((i = 0; i < 8; i++)); do echo "gpu-$n-$i"; done
  done
  exit 0
fi

cat <<EOF
<?xml version="1.0"?>
<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">
<platform version="4.1">
  <!-- The ZeCO paper's cluster: $nodes DGX H100 nodes of 8 GPUs (scripts/sim_platform_dgx.sh $nodes). Each GPU
       is a host, gpu-<node>-<i> (speed 1 Gflop/s, the unit the simulated device spends its stage times in,
       sim/sim_smpi.cpp; it computes nothing). Each node is a zone (Full routing) of its 8 GPUs and a router, the
       node's side of the network; a Full zone over the nodes joins their routers through the fabric.
       In a node, NVLink 4 through NVSwitch: each GPU one private full-duplex link (nvl-<node>-<i>, SPLITDUPLEX) to
       the switch, so a pair talks over two links and pairs do not share one. bw: the pair bandwidth 0 -> 1 that
       spbench measured on H200s at P = 2 (365.8 GB/s, the pair_bandwidth row of
       results/nvidia-h200-x4_collective.csv, 3bac8fe: a calibration value); lat: half its one-hop flag latency
       (1.236 us, the hop_latency row), a route being two links. H100 SXM and H200 have the same NVLink 4 (18 links,
       900 GB/s bidirectional a GPU, NVIDIA's datasheets), so the measured rate stands for the H100's.
       Between nodes, rails: a DGX H100 has one ConnectX-7 NIC a GPU (eight a node, NVIDIA's DGX H100 user guide), so
       GPU i's way out of its node is nic-<node>-<i> (SPLITDUPLEX): every flow of that GPU to other nodes shares it
       (UP out, DOWN in; InfiniBand is full duplex), and the node's 8 NICs together give 8 x 50 = 400 GB/s each way.
       bw: 400 Gb/s NDR = 50 GB/s (ConnectX-7 datasheet: the port's data rate, a datasheet value); lat: 0.6 us, an
       estimate of one NIC, its PCIe path and its cable from the ConnectX-7 / NDR figures, not a measurement. A route
       to another node's GPU j: nic-<a>-<i> UP, fabric, nic-<b>-<j> DOWN (no NVLink link on it: the NIC hangs off the
       GPU's PCIe switch).
       fabric (FATPIPE): a non-blocking two-level fat tree (full bisection, as in NVIDIA's DGX SuperPOD reference
       design), so the bandwidth is any value above every node's 400 GB/s (51.2 TB/s) and flows do not share it; a
       flow between two rails crosses the spine like one on a rail. 0.4 us: three switch hops (leaf, spine, leaf) of
       about 130 ns each, the Quantum-2 NDR switch datasheet's figure.
       Routes are symmetrical (SimGrid's default): each route a -> b also gives b -> a, its links reversed and each
       SPLITDUPLEX link's direction swapped. -->
  <zone id="world" routing="Full">
EOF
for ((n = 0; n < nodes; n++)); do
  echo "    <zone id=\"node-$n\" routing=\"Full\">"
  for ((i = 0; i < 8; i++)); do echo "      <host id=\"gpu-$n-$i\" speed=\"1Gf\"/>"; done
  echo "      <router id=\"router-$n\"/>"
  for ((i = 0; i < 8; i++)); do
    echo "      <link id=\"nvl-$n-$i\" bandwidth=\"365.8GBps\" latency=\"0.618us\" sharing_policy=\"SPLITDUPLEX\"/>"
    echo "      <link id=\"nic-$n-$i\" bandwidth=\"50GBps\" latency=\"0.6us\" sharing_policy=\"SPLITDUPLEX\"/>"
  done
  for ((i = 0; i < 8; i++)); do
    for ((j = i + 1; j < 8; j++)); do
      echo "      <route src=\"gpu-$n-$i\" dst=\"gpu-$n-$j\"><link_ctn id=\"nvl-$n-$i\" direction=\"UP\"/>"`
        `"<link_ctn id=\"nvl-$n-$j\" direction=\"DOWN\"/></route>"
    done
    echo "      <route src=\"gpu-$n-$i\" dst=\"router-$n\"><link_ctn id=\"nic-$n-$i\" direction=\"UP\"/></route>"
  done
  echo "    </zone>"
done
echo "    <link id=\"fabric\" bandwidth=\"51.2TBps\" latency=\"0.4us\" sharing_policy=\"FATPIPE\"/>"
for ((a = 0; a < nodes; a++)); do
  for ((b = a + 1; b < nodes; b++)); do
    echo "    <zoneRoute src=\"node-$a\" dst=\"node-$b\" gw_src=\"router-$a\" gw_dst=\"router-$b\">"`
      `"<link_ctn id=\"fabric\"/></zoneRoute>"
  done
done
echo "  </zone>"
echo "</platform>"
