#!/bin/sh
# SPDX-License-Identifier: MIT
# A library never prints (virtq/log.h): the shared library references no
# stdio output symbol, fortified (__*_chk) and unlocked forms included.
# Nothing is exempt.
# Usage: no-stdio.sh NM LIBVIRTQ_SO
set -eu
nm=$1 lib=$2
out='stdout|stderr|printf|fprintf|vprintf|vfprintf|puts|fputs|fputc|putc|putchar|perror|dprintf|vdprintf|fwrite'
found=$("$nm" -D -u "$lib" | awk '{ print $NF }' | sed 's/@.*//' |
	grep -E "^(_IO_|__)?($out)(_unlocked|_chk)?$" || true)
if [ -n "$found" ]; then
	echo "$lib references stdio output:" $found
	exit 1
fi
echo "$lib: no stdio output symbol"
