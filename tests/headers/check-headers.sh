#!/bin/sh
# SPDX-License-Identifier: MIT
# Public names carry the project's prefix: every public header compiles on
# its own, and all of them together with the kernel's virtio and vhost uapi
# headers, included before ours and after, with -Werror.
# Usage: check-headers.sh CC INCLUDE_DIR
set -eu
cc=$1 inc=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kernel=$(cd /usr/include && ls linux/virtio_*.h linux/vhost.h)
ours=$(cd "$inc" && ls virtq/*.h virtq/guest/*.h)
[ -n "$kernel" ] || { echo "no <linux/virtio_*.h> in /usr/include"; exit 1; }

compile() {
	"$cc" -std=gnu11 -Wall -Wextra -Werror -I"$inc" -c "$1" -o /dev/null
}
fail=0
for h in $ours; do
	printf '#include <%s>\n' "$h" > "$tmp/one.c"
	compile "$tmp/one.c" || { echo "FAIL: <$h> alone"; fail=1; }
done
for order in linux-first ours-first; do
	: > "$tmp/$order.c"
	[ $order = linux-first ] && printf '#include <%s>\n' $kernel >> "$tmp/$order.c"
	printf '#include <%s>\n' $ours >> "$tmp/$order.c"
	[ $order = ours-first ] && printf '#include <%s>\n' $kernel >> "$tmp/$order.c"
	compile "$tmp/$order.c" || { echo "FAIL: ours with the kernel's ($order)"; fail=1; }
done
[ $fail -eq 0 ] && echo "$(echo $ours | wc -w) headers, alone and with $(echo $kernel | wc -w) kernel headers: ok"
exit $fail
