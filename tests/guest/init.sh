#!/bin/busybox sh
# SPDX-License-Identifier: MIT
# /init of the test guest: mount, load the virtio modules, bring eth0 up if
# there is one (unless /vq/ifdown: the command does), run /vq/cmd with its output on the second serial port (the
# host keeps it in output.log), or with /vq/interactive a shell on the
# console, print VQ_RC=<status>, power off.
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
export PATH=/bin HOME=/tmp
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
# The initramfs has no device nodes (built without root): take the console now.
exec < /dev/console > /dev/console 2>&1

OUT=/dev/ttyS1
stty -F $OUT raw -echo 2> /dev/null || OUT=/dev/console

for m in $(cat /lib/modules/order); do
	insmod /lib/modules/$m.ko || echo "VQ_MODULE_FAILED $m" > $OUT
done

# Only our frames on the wire: no IPv6 autoconf, no addresses.
echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 2> /dev/null
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 2> /dev/null
ip link set lo up
if [ -e /sys/bus/pci/devices ] && grep -q 0x1af4 /sys/bus/pci/devices/*/vendor 2> /dev/null; then
	i=0
	while [ ! -e /sys/class/net/eth0 ] && [ -z "$(ls /sys/bus/virtio/drivers/vmw_vsock_virtio_transport 2> /dev/null | grep virtio)" ] && [ $i -lt 40 ]; do
		sleep 0.05
		i=$((i + 1))
	done
fi
if [ -e /sys/class/net/eth0 ]; then
	ip link set eth0 promisc on
	[ -e /vq/ifdown ] || ip link set eth0 up
fi

echo "VQ_BEGIN kernel=$(uname -r) uptime=$(cut -d' ' -f1 /proc/uptime)" > $OUT
cd /tmp
if [ -e /vq/interactive ]; then
	# run-guest.sh --interactive: a shell on the console, its status ours
	echo "virtq test guest: $(uname -r); eth0 $(cat /sys/class/net/eth0/address 2> /dev/null || echo absent);" \
		"tools: gnet, gvsock, ip, ping.  exit (or Ctrl-D) powers off."
	setsid cttyhack sh -l
else
	sh /vq/cmd > $OUT 2>&1 < /dev/null
fi
echo "VQ_RC=$? uptime=$(cut -d' ' -f1 /proc/uptime)" > $OUT
poweroff -f
