#!/bin/sh
# SPDX-License-Identifier: MIT
#
# virtq-vsock's VMs, given as vhost-device-vsock's users give them (issue
# 33): --vm KEY=VALUE,... repeated, or a YAML --config file of the same
# keys.  The same VMs in either form (keys in another order, '-' or '_',
# comments, quotes) make the same daemon: --print-config prints the same
# lines.  The single-VM flags keep their meaning.  Two VMs of one CID or
# two sockets of one path are refused before anything is created, and a
# config file that is not exactly that shape is refused naming its line
# and what was found there.  Then a daemon of two VMs serves both sockets.
#
# usage: test_vsock_config.sh VIRTQ_VSOCK
set -u
vsock=$1
fail=0
dir=$(mktemp -d /tmp/vq-vsock-config.XXXXXX)
trap 'rm -rf "$dir"' EXIT

ok() {
	echo "ok   $1"
}

bad() {
	echo "FAIL $1"
	fail=1
}

# The command exits 2 with one line that holds $1.
refused() {
	want=$1
	shift
	out=$("$vsock" "$@" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] &&
	   printf '%s' "$out" | grep -qF -- "$want"; then
		ok "refused: $want"
	else
		bad "not refused as '$want' (rc=$rc): $out"
	fi
}

vm3="guest-cid=3,socket=$dir/vhost3.socket,uds-path=$dir/vm3.vsock,groups=group1+groupA,tx-buffer-size=65536,queue-size=1024"
vm4="uds_path=$dir/vm4.vsock,socket=$dir/vhost4.socket,guest_cid=4,tx_buffer_size=32768,groups=group1,host-ports=22+8000-8099"
vm5="socket=$dir/vhost5.socket,uds-path=$dir/vm5.vsock,guest-cid=5,guest-ports=none"
cat >"$dir/vms.yaml" <<EOF
# vhost-device-vsock's shape
---
vms:
    - guest_cid: 3
      socket: $dir/vhost3.socket
      uds_path: "$dir/vm3.vsock"   # quoted
      tx_buffer_size: 65536
      queue_size: 1024
      groups: group1+groupA

    - guest_cid: 4
      socket: '$dir/vhost4.socket'
      uds_path: $dir/vm4.vsock
      tx_buffer_size: 32768
      groups: group1
      host_ports: 22,8000-8099
    -
      socket: $dir/vhost5.socket
      uds-path: $dir/vm5.vsock
      guest_cid: 5
      guest_ports: none
EOF

# -- the effective configuration: --vm and --config the same
a=$("$vsock" --print-config --vm "$vm3" --vm "$vm4" --vm "$vm5") || bad "--print-config --vm failed"
b=$("$vsock" --print-config --config "$dir/vms.yaml") || bad "--print-config --config failed"
if [ -n "$a" ] && [ "$a" = "$b" ]; then
	ok "--vm and --config print the same VMs"
else
	bad "--vm and --config differ:"
	printf '%s\n--\n%s\n' "$a" "$b" | sed 's/^/    /'
fi
want="--vm guest-cid=3,socket=$dir/vhost3.socket,uds-path=$dir/vm3.vsock,tx-buffer-size=65536,groups=group1+groupA,host-ports=all,guest-ports=all
--vm guest-cid=4,socket=$dir/vhost4.socket,uds-path=$dir/vm4.vsock,tx-buffer-size=32768,groups=group1,host-ports=22+8000-8099,guest-ports=all
--vm guest-cid=5,socket=$dir/vhost5.socket,uds-path=$dir/vm5.vsock,tx-buffer-size=262144,groups=default,host-ports=all,guest-ports=none"
if [ "$a" = "$want" ]; then
	ok "every key as given, defaults filled in"
else
	bad "--print-config printed:"
	printf '%s\n' "$a" | sed 's/^/    /'
fi
# the printed lines are themselves a command line that runs the same
set -f
c=$(eval "\"$vsock\" --print-config $(printf '%s\n' "$a" | tr '\n' ' ')")
set +f
[ "$c" = "$a" ] && ok "--print-config's lines read back the same" ||
	bad "--print-config's lines read back as: $c"
# the command line's options are every VM's defaults
d=$("$vsock" --print-config --buf-alloc 1M --host-ports 80 --vm "$vm5")
case $d in
*"tx-buffer-size=1048576,groups=default,host-ports=80,guest-ports=none") ok "options are every VM's defaults" ;;
*) bad "defaults: $d" ;;
esac
# the single-VM flags, and vhost-device-vsock's names of them
e=$("$vsock" --print-config --socket "$dir/vu" --guest-cid=7 --uds-path "$dir/h" \
	--tx-buffer-size 64K --groups a+b --queue-size 256)
[ "$e" = "--vm guest-cid=7,socket=$dir/vu,uds-path=$dir/h,tx-buffer-size=65536,groups=a+b,host-ports=all,guest-ports=all" ] &&
	ok "single-VM flags, vhost-device-vsock's names" || bad "single VM: $e"

# -- refused before anything is created
refused "--vm 2: guest-cid 3 is --vm 1's too" --vm "$vm3" \
	--vm "guest-cid=3,socket=$dir/x.socket,uds-path=$dir/x.vsock"
refused "--vm 2: '$dir/vhost3.socket' is a socket of --vm 1 too" --vm "$vm3" \
	--vm "guest-cid=4,socket=$dir/vhost3.socket,uds-path=$dir/x.vsock"
refused "--vm 2: '$dir/vm3.vsock' is a socket of --vm 1 too" --vm "$vm3" \
	--vm "guest-cid=4,socket=$dir/x.socket,uds-path=$dir/vm3.vsock"
refused "--vm 2: '$dir/vm3.vsock.seqpacket' is a socket of --vm 1 too" --vm "$vm3" \
	--vm "guest-cid=4,socket=$dir/vm3.vsock.seqpacket,uds-path=$dir/x.vsock"
refused "--vm 1: '$dir/s' is a socket of the same VM too" \
	--vm "guest-cid=4,socket=$dir/s,uds-path=$dir/s"
refused "--vm 1: socket is required" --vm "guest-cid=4,uds-path=$dir/x"
refused "--vm 1: uds-path is required" --vm "guest-cid=4,socket=$dir/x"
refused "--vm 1: forward-cid: vhost-device-vsock's AF_VSOCK forwarding is not served" \
	--vm "guest-cid=4,socket=$dir/x,forward-cid=1"
refused "--vm 1: colour: not a key of a VM" --vm "$vm3,colour=blue"
refused "--vm 1: 'groups' is not KEY=VALUE" --vm "$vm3,groups"
refused "--vm 1: guest-cid: '2'" --vm "guest-cid=2,socket=$dir/x,uds-path=$dir/y"
refused "--vm 1: groups: 'a++b' is not a list of group names" --vm "$vm5,groups=a++b"
refused "--vm 1: host-ports: the range 9-1 runs backwards" --vm "$vm5,host-ports=9-1"
refused "--config: not with --vm" --vm "$vm3" --config "$dir/vms.yaml"
refused "--guest-cid: not with --vm or --config" --vm "$vm3" --guest-cid 9
refused "--socket-path: not with the VMs' own sockets" --vm "$vm3" --socket-path "$dir/vu"

# -- a config file of another shape: the line, and what is there
yaml() {
	want=$1
	printf '%s' "$2" >"$dir/bad.yaml"
	refused "$want" --config "$dir/bad.yaml"
}
yaml "bad.yaml:3: uds_pth: not a key of a VM" "vms:
  - guest_cid: 3
    uds_pth: /x
"
yaml "bad.yaml:4: guest_cid: given twice for one VM" "vms:
  - guest_cid: 3
    socket: /a
    guest_cid: 4
"
yaml "bad.yaml:2: a tab in the indentation" "vms:
	- guest_cid: 3
"
yaml "bad.yaml:1: 'vm:': the file is a \"vms:\" list" "vm:
  - guest_cid: 3
"
yaml "bad.yaml:4: 'extra: 1': the only top-level key is vms" "vms:
  - guest_cid: 3
    socket: /a
extra: 1
"
yaml "bad.yaml:3: 'socket: /a': a VM's keys must line up" "vms:
  - guest_cid: 3
     socket: /a
"
yaml "bad.yaml:3: groups: needs a value" "vms:
  - guest_cid: 3
    groups:
"
yaml "bad.yaml:2: '[a, b]' is not a plain value this file may hold" "vms:
  - groups: [a, b]
"
yaml "bad.yaml:2: guest_cid: 'x'" "vms:
  - guest_cid: x
"
yaml "bad.yaml: no VMs" "vms:
"
yaml "bad.yaml:2: '\"/a': a quoted value must end" "vms:
  - socket: \"/a
"
refused "--config: cannot read $dir/none.yaml" --config "$dir/none.yaml"

# -- two VMs: the daemon serves both sockets, and removes them at exit
"$vsock" --quiet --vm "$vm3" --vm "$vm4" >"$dir/log" 2>&1 &
pid=$!
i=0
while [ $i -lt 200 ] && ! { [ -S "$dir/vhost3.socket" ] && [ -S "$dir/vhost4.socket" ] &&
			    [ -S "$dir/vm3.vsock" ] && [ -S "$dir/vm4.vsock_seqpacket" ]; }; do
	sleep 0.05
	i=$((i + 1))
done
[ $i -lt 200 ] && ok "two VMs: both vhost-user sockets and host sides" ||
	{ bad "two VMs: sockets missing"; cat "$dir/log"; }
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] && ok "SIGTERM: exit 0" || bad "exit $rc: $(cat "$dir/log")"
[ ! -e "$dir/vhost3.socket" ] && [ ! -e "$dir/vm4.vsock" ] &&
	ok "its sockets removed" || bad "sockets left behind"
exit $fail
