#!/usr/bin/env bash
# Writes the SimGrid platform of the ZeCO paper's cluster to stdout: NODES DGX H100 nodes of 8 GPUs on NVSwitch, each
# node's 8 x 400 Gb/s NDR InfiniBand (one ConnectX-7 NIC a GPU) into a non-blocking fat tree (DESIGN §10). Hosts are
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
       sim/sim_smpi.cpp; it computes nothing). SimGrid's cluster of clusters: one cluster a node, a Full zone over
       them whose zoneRoutes join the nodes' routers through the links below.
       In a node, NVLink 4 through NVSwitch: each GPU one private full-duplex link (SPLITDUPLEX) to the switch, so a
       pair talks over two links and pairs do not share one. bw: the pair bandwidth 0 -> 1 that spbench measured on
       H200s at P = 2 (365.8 GB/s, the pair_bandwidth row of results/nvidia-h200-x4_collective.csv, 3bac8fe); lat: half
       its one-hop flag latency (1.236 us, the hop_latency row), a route being two links. H100 SXM and H200 have the
       same NVLink 4 (18 links, 900 GB/s bidirectional a GPU, NVIDIA's datasheets), so the measured rate stands for
       the H100's.
       Between nodes, a route gpu -> router-<a> -> nic-<a>, up-<a>, fabric, up-<b>, nic-<b> -> router-<b> -> gpu:
       nic-<n> (FATPIPE: each flow gets it whole, none shares it): one flow goes through one NIC, 400 Gb/s NDR = 50 GB/s
       (ConnectX-7 datasheet); 0.6 us is an estimate of one NIC and its cable from the ConnectX-7 / NDR figures, not a
       measurement. The NIC is per flow, not per GPU: one GPU's flows to several GPUs of other nodes get 50 GB/s each
       (up to the node's 400), where a GPU's own rail would hold them to 50 GB/s together.
       up-<n> (SPLITDUPLEX, shared a direction): the node's 8 NICs together, 8 x 50 GB/s = 400 GB/s out and as much
       in (InfiniBand is full duplex), which the node's flows out (UP) or in (DOWN) share; no latency of its own
       (nic-<n> holds it). A shared link of one direction would let a node's sends and receives share 400 GB/s.
       fabric (FATPIPE): a non-blocking two-level fat tree (full bisection, as in NVIDIA's DGX SuperPOD reference
       design), so the bandwidth is any value above every node's up link (51.2 TB/s) and flows do not share it; 0.4 us:
       three switch hops (leaf, spine, leaf) of about 130 ns each, the Quantum-2 NDR switch datasheet's figure.
       Routes are symmetrical (SimGrid's default): each zoneRoute a -> b also gives b -> a, its links reversed and
       each SPLITDUPLEX link's direction swapped (up-<b> UP, up-<a> DOWN). -->
  <zone id="world" routing="Full">
EOF
for ((n = 0; n < nodes; n++)); do
  echo "    <cluster id=\"node-$n\" prefix=\"gpu-$n-\" suffix=\"\" radical=\"0-7\" speed=\"1Gf\" bw=\"365.8GBps\"
             lat=\"0.618us\" sharing_policy=\"SPLITDUPLEX\" router_id=\"router-$n\"/>"
done
for ((n = 0; n < nodes; n++)); do
  echo "    <link id=\"nic-$n\" bandwidth=\"50GBps\" latency=\"0.6us\" sharing_policy=\"FATPIPE\"/>"
  echo "    <link id=\"up-$n\" bandwidth=\"400GBps\" latency=\"0us\" sharing_policy=\"SPLITDUPLEX\"/>"
done
echo "    <link id=\"fabric\" bandwidth=\"51.2TBps\" latency=\"0.4us\" sharing_policy=\"FATPIPE\"/>"
for ((a = 0; a < nodes; a++)); do
  for ((b = a + 1; b < nodes; b++)); do
    echo "    <zoneRoute src=\"node-$a\" dst=\"node-$b\" gw_src=\"router-$a\" gw_dst=\"router-$b\">"
    echo "      <link_ctn id=\"nic-$a\"/><link_ctn id=\"up-$a\" direction=\"UP\"/><link_ctn id=\"fabric\"/>"
    echo "      <link_ctn id=\"up-$b\" direction=\"DOWN\"/><link_ctn id=\"nic-$b\"/>"
    echo "    </zoneRoute>"
  done
done
echo "  </zone>"
echo "</platform>"
