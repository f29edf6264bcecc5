/* SPDX-License-Identifier: MIT */
/*
 * Guarded mappings: guest memory (or a dirty log) mapped from a file the
 * front-end may truncate while we use it.  A SIGBUS inside a guarded
 * mapping replaces the whole mapping with anonymous zero pages, records
 * the loss, and shuts down the socket registered with it, so the thread
 * that serves that socket wakes and closes the connection
 * (include/virtq/mem.h, vq_mem_handle_sigbus, says why replacement).
 * The registry is process-wide: every back-end of a daemon shares it.
 */
#ifndef VIRTQ_MEM_GUARD_H
#define VIRTQ_MEM_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* Mappings guarded at once: many guests of one daemon, 8+ regions and a
 * log each. */
#define VQ_GUARD_SLOTS 1024u

/* Does a mapping of fd need a guard?  Not a memfd sealed against
 * shrinking (F_SEAL_SHRINK) outside hugetlbfs: its size, checked against
 * the mapping after this call, can no longer drop.  Everything else does:
 * unsealed memfds, plain files, hugetlbfs (a punched hole refaults from a
 * pool that may be empty).  Ask before checking the size: a file shrunk
 * and sealed between the two would pass both. */
VQ_INTERNAL bool vq_guard_needed(int fd);

/* Guard [addr, addr+len) (a whole mapping); shut_fd (or -1) is shut down
 * when it is lost.  Installs the SIGBUS handler on first use.  Returns
 * the slot, -ENOSPC when every slot is taken, or -ENOTSUP when the handler
 * could not be installed. */
VQ_INTERNAL int vq_guard_add(void *addr, size_t len, int shut_fd);

/* Remove slot's guard (slot < 0: none) and unmap [addr, addr+len), in
 * that order: a guard left on a range unmapped and reused would replace
 * someone else's mapping.  If a handler is replacing the mapping right
 * now, waits for it to finish (and to shut its socket down: so the owner
 * may close that socket once this returns). */
VQ_INTERNAL void vq_guard_unmap(int slot, void *addr, size_t len);

/* Was slot's mapping lost?  true and *offset (of the first fault, from
 * the mapping's start), or false. */
VQ_INTERNAL bool vq_guard_lost(int slot, uint64_t *offset);

/* Slots in use (for tests: none may leak). */
VQ_INTERNAL unsigned vq_guard_count(void);

#endif
