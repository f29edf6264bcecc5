#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# DPDK testpmd's vhost PMD as a `virtq-perf net --backend`: the same
# command-line shape as virtq-net (virtq-perf appends --socket-path), so
# `virtq-perf ab` can pair our backend against DPDK's with our front-end
# driving both, e.g. behind a vIOMMU, which no DPDK front-end speaks.
#
#   bench/testpmd-vhost.sh [--fwd rxonly|txonly|macswap] [--iommu]
#                          [--cpu N] --socket-path PATH
#
# --iommu: iommu-support=1 (translate through the vhost-user IOTLB).
# "--fwd=X" and "--cpu=N" are accepted too (one word each, for
# virtq-perf net --backend-arg).
# Forwarding runs on CPU --cpu (1); the main lcore is the other CPU.
set -eu
FWD=rxonly IOMMU= CPU=1 SOCK=
while [ $# -gt 0 ]; do
	case "$1" in
	--fwd) FWD=$2; shift 2 ;;
	--fwd=*) FWD=${1#--fwd=}; shift ;;
	--iommu) IOMMU=,iommu-support=1; shift ;;
	--cpu) CPU=$2; shift 2 ;;
	--cpu=*) CPU=${1#--cpu=}; shift ;;
	--socket-path) SOCK=$2; shift 2 ;;
	*) echo "testpmd-vhost.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
[ -n "$SOCK" ] || { echo "testpmd-vhost.sh: --socket-path is required" >&2; exit 2; }
MAIN=$((1 - CPU))
# --stats-period keeps testpmd running with stdin closed; SIGTERM stops it.
exec dpdk-testpmd -l "$MAIN,$CPU" --main-lcore "$MAIN" --file-prefix "vqbench-$$" \
	--no-huge -m 256 --no-pci --log-level=lib.eal:notice \
	--vdev "net_vhost0,iface=$SOCK,queues=1,client=0$IOMMU" -- \
	--forward-mode="$FWD" --nb-cores=1 --txpkts=64 --total-num-mbufs=8192 \
	--stats-period 60 </dev/null >/dev/null 2>&1
