#!/bin/sh
# SPDX-License-Identifier: MIT
# A man page names every flag the tool's --help names.
# Usage: man-flags.sh MANPAGE COMMAND [ARGS...]   (COMMAND ARGS --help)
set -eu
man=$1
shift
help=$("$@" --help) || { echo "FAIL: '$* --help' exited $?"; exit 1; }
# The page's text with roff's escaped hyphens plain: \-\-socket\-path.
text=$(sed 's/\\-/-/g; s/\\f[BIRP]//g' "$man")
missing=
for flag in $(printf '%s\n' "$help" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
	printf '%s\n' "$text" | grep -qE -- "$flag([^a-z0-9-]|\$)" ||
		missing="$missing $flag"
done
if [ -n "$missing" ]; then
	echo "FAIL: $(basename "$man") lacks what '$* --help' names:$missing"
	exit 1
fi
echo "$(basename "$man"): every flag of '$* --help' is documented"
