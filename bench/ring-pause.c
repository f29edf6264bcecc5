// SPDX-License-Identifier: MIT
/*
 * What a ring pause costs a back-end: connect to the back-end at PATH as a
 * front-end with one queue pair, start the rings, then switch the dirty
 * log on and off CYCLES times, as QEMU does when a migration starts and
 * ends.  Each switch pauses and resumes every ring several times
 * (SET_LOG_BASE, SET_FEATURES with LOG_ALL, each ring's SET_VRING_ADDR),
 * the same messages whatever the back-end, so two back-ends compare by
 * the rate of cycles.  Prints {"cycles_per_sec": N, "us_per_cycle": X}.
 *
 *   ring-pause PATH CYCLES
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <virtq/runtime.h>
#include <virtq/guest/frontend.h>

int main(int argc, char **argv)
{
	struct vq_vhu_frontend_config c = {
		.features = VQ_BIT(VQ_F_VERSION_1), .nqueues = 2,
		.queue_size = 256, .mem_size = 16u << 20,
	};
	struct vq_vhu_frontend *f = NULL;
	unsigned long cycles;
	uint64_t t0, t1;
	int r = -1;

	if (argc != 3) {
		fprintf(stderr, "usage: ring-pause PATH CYCLES\n");
		return 2;
	}
	cycles = strtoul(argv[2], NULL, 10);
	for (int i = 0; i < 500 && r; i++) {
		r = vq_vhu_frontend_connect(argv[1], &c, &f);
		if (r)
			usleep(10000);
	}
	if (r || (r = vq_vhu_frontend_start(f))) {
		fprintf(stderr, "ring-pause: %s\n", f ? vq_vhu_frontend_error_msg(f) : "no connection");
		return 1;
	}
	t0 = vq_rt_now_ns();
	for (unsigned long i = 0; i < cycles; i++)
		if ((r = vq_vhu_frontend_set_logging(f, true)) ||
		    (r = vq_vhu_frontend_set_logging(f, false))) {
			fprintf(stderr, "ring-pause: cycle %lu: %s\n", i,
				vq_vhu_frontend_error_msg(f));
			return 1;
		}
	t1 = vq_rt_now_ns();
	printf("{\"cycles_per_sec\": %.1f, \"us_per_cycle\": %.2f}\n",
	       cycles / ((t1 - t0) / 1e9), (t1 - t0) / 1e3 / cycles);
	vq_vhu_frontend_free(f);
	return 0;
}
