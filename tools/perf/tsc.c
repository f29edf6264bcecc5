// SPDX-License-Identifier: MIT
/* virtq-perf: whether the cycle counter can stand in for the clock. */
#include <stdio.h>
#include <string.h>

#include "tsc.h"

double perf_tsc_hz_since(struct perf_tsc_mark m)
{
	struct perf_tsc_mark now;

	do
		now = perf_tsc_mark();
	while (now.ns - m.ns < 1000000);
	return (double)(now.tsc - m.tsc) * 1e9 / (double)(now.ns - m.ns);
}

#if defined(__x86_64__) || defined(__i386__)
/* constant_tsc: one rate whatever the CPU's frequency; nonstop_tsc: it
 * runs in deep idle states too.  Linux lists both in /proc/cpuinfo. */
bool perf_tsc_invariant(void)
{
	char line[8192];
	bool constant = false, nonstop = false;
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		constant = strstr(line, " constant_tsc") != NULL;
		nonstop = strstr(line, " nonstop_tsc") != NULL;
		break;
	}
	fclose(f);
	return constant && nonstop;
}

/* Linux keeps the TSC as its clocksource only while the CPUs' counters
 * agree (a guest on kvm-clock may see them apart). */
bool perf_tsc_synced(void)
{
	char name[32] = "";
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");

	if (!f)
		return false;
	if (!fgets(name, sizeof(name), f))
		name[0] = '\0';
	fclose(f);
	return strcmp(name, "tsc\n") == 0;
}
#else
bool perf_tsc_invariant(void)
{
	return false;
}

/* perf_tsc() is the monotonic clock here: one time line on every CPU. */
bool perf_tsc_synced(void)
{
	return true;
}
#endif
