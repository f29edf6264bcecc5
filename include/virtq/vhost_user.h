/* SPDX-License-Identifier: MIT */
/*
 * virtq/vhost_user.h - the vhost-user message codec.
 *
 * The protocol of record is QEMU's docs/interop/vhost-user.rst.  This codec
 * is pure: bytes plus received file descriptors in, a typed message or an
 * error out, and the reverse.  It does no I/O and keeps no state, so it can
 * be fuzzed.  Every message is checked against a table of request
 * descriptors (payload kind and size, fds allowed, reply) before anything
 * acts on it.
 *
 * Names: functions are vq_vhu_*, constants VQ_VHU_* (the spec's VHOST_USER_*
 * without the prefix, so they cannot clash with other headers).
 * All numbers on the wire are in the machine's native byte order (spec).
 *
 * Growth (docs/DESIGN.md, "ABI"): struct vq_vhu_region is the protocol's
 * own region description and never changes.  struct vq_vhu_msg is the
 * protocol's message decoded: a payload kind the protocol adds becomes a
 * member of its union, which stays VQ_VHU_MSG_UNION_SIZE bytes (the largest
 * payload, a config space, fixes it), so the struct keeps its size and
 * layout.
 */
#ifndef VIRTQ_VHOST_USER_H
#define VIRTQ_VHOST_USER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Front-end requests (the subset we implement; "Front-end message types"). */
enum vq_vhu_request {
	VQ_VHU_GET_FEATURES = 1,
	VQ_VHU_SET_FEATURES = 2,
	VQ_VHU_SET_OWNER = 3,
	VQ_VHU_RESET_OWNER = 4,
	VQ_VHU_SET_MEM_TABLE = 5,
	VQ_VHU_SET_LOG_BASE = 6,
	VQ_VHU_SET_LOG_FD = 7,
	VQ_VHU_SET_VRING_NUM = 8,
	VQ_VHU_SET_VRING_ADDR = 9,
	VQ_VHU_SET_VRING_BASE = 10,
	VQ_VHU_GET_VRING_BASE = 11,
	VQ_VHU_SET_VRING_KICK = 12,
	VQ_VHU_SET_VRING_CALL = 13,
	VQ_VHU_SET_VRING_ERR = 14,
	VQ_VHU_GET_PROTOCOL_FEATURES = 15,
	VQ_VHU_SET_PROTOCOL_FEATURES = 16,
	VQ_VHU_GET_QUEUE_NUM = 17,
	VQ_VHU_SET_VRING_ENABLE = 18,
	VQ_VHU_SEND_RARP = 19,
	VQ_VHU_NET_SET_MTU = 20,
	VQ_VHU_SET_BACKEND_REQ_FD = 21,    /* QEMU 7.2: SET_SLAVE_REQ_FD */
	VQ_VHU_IOTLB_MSG = 22,
	VQ_VHU_GET_CONFIG = 24,
	VQ_VHU_SET_CONFIG = 25,
	VQ_VHU_POSTCOPY_ADVISE = 28,       /* reply: the userfaultfd */
	VQ_VHU_POSTCOPY_LISTEN = 29,
	VQ_VHU_POSTCOPY_END = 30,
	VQ_VHU_RESET_DEVICE = 34,
	VQ_VHU_GET_MAX_MEM_SLOTS = 36,
	VQ_VHU_ADD_MEM_REG = 37,
	VQ_VHU_REM_MEM_REG = 38,
	VQ_VHU_SET_STATUS = 39,
	VQ_VHU_GET_STATUS = 40,
	VQ_VHU_REQUEST_MAX = 40,
};

/* Back-end requests, sent on the back-end channel ("Back-end message
 * types"); a namespace of their own. */
enum vq_vhu_backend_request {
	VQ_VHU_BACKEND_IOTLB_MSG = 1,
	VQ_VHU_BACKEND_REQUEST_MAX = 1,
};

/* struct vhost_iotlb_msg types and permissions ("IOMMU support"). */
#define VQ_VHU_IOTLB_MISS        1u
#define VQ_VHU_IOTLB_UPDATE      2u
#define VQ_VHU_IOTLB_INVALIDATE  3u
#define VQ_VHU_IOTLB_ACCESS_FAIL 4u
#define VQ_VHU_IOTLB_PERM_RO     1u        /* VQ_ACCESS_RO */
#define VQ_VHU_IOTLB_PERM_WO     2u
#define VQ_VHU_IOTLB_PERM_RW     3u

/* Header flags ("Header"). */
#define VQ_VHU_VERSION           0x1u
#define VQ_VHU_FLAG_VERSION_MASK 0x3u
#define VQ_VHU_FLAG_REPLY        (1u << 2)
#define VQ_VHU_FLAG_NEED_REPLY   (1u << 3)

/* The virtio feature bit vhost-user reuses for protocol features. */
#define VQ_VHU_F_PROTOCOL_FEATURES 30
/* vhost's feature bit for "log every write to guest memory" (migration). */
#define VQ_VHU_F_LOG_ALL 26

/* Protocol feature bits ("Protocol features"). */
#define VQ_VHU_PROTOCOL_F_MQ                   0
#define VQ_VHU_PROTOCOL_F_LOG_SHMFD            1
#define VQ_VHU_PROTOCOL_F_RARP                 2
#define VQ_VHU_PROTOCOL_F_REPLY_ACK            3
#define VQ_VHU_PROTOCOL_F_MTU                  4
#define VQ_VHU_PROTOCOL_F_BACKEND_REQ          5
#define VQ_VHU_PROTOCOL_F_CROSS_ENDIAN         6
#define VQ_VHU_PROTOCOL_F_CRYPTO_SESSION       7
#define VQ_VHU_PROTOCOL_F_PAGEFAULT            8
#define VQ_VHU_PROTOCOL_F_CONFIG               9
#define VQ_VHU_PROTOCOL_F_BACKEND_SEND_FD      10
#define VQ_VHU_PROTOCOL_F_HOST_NOTIFIER        11
#define VQ_VHU_PROTOCOL_F_INFLIGHT_SHMFD       12
#define VQ_VHU_PROTOCOL_F_RESET_DEVICE         13
#define VQ_VHU_PROTOCOL_F_INBAND_NOTIFICATIONS 14
#define VQ_VHU_PROTOCOL_F_CONFIGURE_MEM_SLOTS  15
#define VQ_VHU_PROTOCOL_F_STATUS               16

/* SET_VRING_KICK/CALL/ERR payload: bits 0-7 the vring index, bit 8 "no fd". */
#define VQ_VHU_VRING_IDX_MASK 0xffu
#define VQ_VHU_VRING_NOFD     (1u << 8)

/* SET_VRING_ADDR flags: bit 0 asks for used-ring logging. */
#define VQ_VHU_VRING_F_LOG 1u

#define VQ_VHU_HDR_SIZE         12u
#define VQ_VHU_MAX_FDS          8u        /* fds one message may carry */
#define VQ_VHU_MEM_TABLE_MAX    8u        /* regions in SET_MEM_TABLE */
#define VQ_VHU_CONFIG_HDR_SIZE  12u
#define VQ_VHU_CONFIG_MAX       256u      /* config bytes in one message */
#define VQ_VHU_PAYLOAD_MAX      (VQ_VHU_CONFIG_HDR_SIZE + VQ_VHU_CONFIG_MAX)
#define VQ_VHU_MSG_MAX          (VQ_VHU_HDR_SIZE + VQ_VHU_PAYLOAD_MAX)
/* The most vrings a KICK/CALL/ERR payload can name. */
#define VQ_VHU_MAX_QUEUES       256u

/* Payload kinds ("Payload"). */
enum vq_vhu_payload {
	VQ_VHU_P_NONE,
	VQ_VHU_P_U64,
	VQ_VHU_P_STATE,            /* vring state description */
	VQ_VHU_P_ADDR,             /* vring address description */
	VQ_VHU_P_MEM,              /* multiple memory regions description */
	VQ_VHU_P_REGION,           /* single memory region description */
	VQ_VHU_P_CONFIG,           /* virtio device config space */
	VQ_VHU_P_VRING_FD,         /* u64: vring index and "no fd" flag */
	VQ_VHU_P_LOG,              /* log description: size and offset */
	VQ_VHU_P_EMPTY,            /* a reply without payload (SET_LOG_BASE's) */
	VQ_VHU_P_IOTLB,            /* struct vhost_iotlb_msg (32 bytes) */
	/* QEMU's "postcopy registered": a u64 (0 = success) sent after the
	 * back-end answered a memory-table change made while postcopy
	 * listens, under the request it last sent (SET_MEM_TABLE, ADD_ or
	 * REM_MEM_REG, or 0 for none); no other request has this shape */
	VQ_VHU_P_POSTCOPY_ACK,
};

struct vq_vhu_region {
	uint64_t gpa;           /* guest address */
	uint64_t size;
	uint64_t uaddr;         /* user (front-end) address */
	uint64_t mmap_offset;
};

/* The size of vq_vhu_msg's payload union, fixed: larger than any payload. */
#define VQ_VHU_MSG_UNION_SIZE 272u

/* A decoded message.  fds[0, nfds) are owned by the message. */
struct vq_vhu_msg {
	uint32_t request;
	uint32_t flags;
	uint32_t size;                  /* payload bytes on the wire */
	enum vq_vhu_payload kind;
	int fds[VQ_VHU_MAX_FDS];
	unsigned nfds;
	union {
		uint64_t u64;
		struct {
			uint32_t index;
			uint32_t num;
		} state;
		struct {
			uint32_t index;
			uint32_t flags;
			uint64_t desc;
			uint64_t used;
			uint64_t avail;
			uint64_t log;
		} addr;
		struct {
			uint32_t nregions;
			struct vq_vhu_region regions[VQ_VHU_MEM_TABLE_MAX];
		} mem;
		struct vq_vhu_region region;
		struct {
			uint32_t offset;
			uint32_t size;
			uint32_t flags;
			uint8_t data[VQ_VHU_CONFIG_MAX];
		} config;
		struct {
			uint32_t index;
			bool nofd;
		} vring_fd;
		struct {
			uint64_t size;  /* bytes of log */
			uint64_t offset; /* where it starts in the fd */
		} log;
		struct {
			uint64_t iova;
			uint64_t size;
			uint64_t uaddr;
			uint8_t perm;   /* VQ_VHU_IOTLB_PERM_* */
			uint8_t type;   /* VQ_VHU_IOTLB_* */
		} iotlb;
		uint8_t size_fixed[VQ_VHU_MSG_UNION_SIZE];
	} u;
};

/* The request's name ("VHOST_USER_GET_FEATURES"), or NULL if unknown. */
const char *vq_vhu_request_name(uint32_t request);

/* Does the request always get a reply (not counting REPLY_ACK)? */
bool vq_vhu_request_has_reply(uint32_t request);

/* Is the reply to this request, while postcopy listens, its own payload
 * echoed with the back-end's addresses (SET_MEM_TABLE, ADD_MEM_REG)? */
bool vq_vhu_request_postcopy_echo(uint32_t request);

/*
 * Check a request header (the first VQ_VHU_HDR_SIZE bytes) before reading its
 * payload: version 1, no reply flag, no unknown flag bits, a request we know,
 * a payload size the request allows.  *payload_size is set on success.
 * -EINVAL (bad header), -EOPNOTSUPP (unknown request), -EMSGSIZE (size).
 */
int vq_vhu_check_request_hdr(const void *hdr, uint32_t *payload_size);

/*
 * Decode a complete request of len bytes with the nfds descriptors that came
 * with it.  nqueues bounds the vring index.  On success msg owns the fds the
 * request carries and every other fd has been closed; on error every fd has
 * been closed.  Returns 0 or -EINVAL, -EOPNOTSUPP, -EMSGSIZE (size),
 * -EBADF (wrong number of fds), -ERANGE (vring index).
 * err (optional, errlen bytes) receives a message naming the problem.
 */
int vq_vhu_decode_request(const void *buf, size_t len, const int *fds,
			  unsigned nfds, unsigned nqueues,
			  struct vq_vhu_msg *msg, char *err, size_t errlen);

/*
 * Decode the reply to request `expect` (a front-end reading what a back-end
 * sent): reply flag set, same request, the payload the request's reply has
 * (or a u64 for a REPLY_ACK; or, for a request with a postcopy echo and
 * !ack, the request's own payload).  Only POSTCOPY_ADVISE's reply carries
 * an fd (the userfaultfd), owned by msg; any other fds given are refused.
 * Same errors as vq_vhu_decode_request, plus -EPROTO for a reply to another
 * request.
 */
int vq_vhu_decode_reply(const void *buf, size_t len, const int *fds,
			unsigned nfds, uint32_t expect, bool ack,
			struct vq_vhu_msg *msg, char *err, size_t errlen);

/*
 * Serialize msg (request or reply, by VQ_VHU_FLAG_REPLY) into buf: header and
 * payload per the request's table entry; msg->size is ignored and computed.
 * A reply with kind VQ_VHU_P_U64 is a REPLY_ACK or a u64 reply.  Returns the
 * length, -ENOBUFS if cap is too small, -EINVAL for an inconsistent msg.
 */
ssize_t vq_vhu_encode(const struct vq_vhu_msg *msg, void *buf, size_t cap);

/*
 * The back-end channel's requests (msg->request a vq_vhu_backend_request):
 * encode one (back-end side) or decode one (front-end side), with the same
 * checks and returns as the front-end requests' functions.  An IOTLB
 * message on this channel is a miss or an access failure.
 */
ssize_t vq_vhu_encode_backend_request(const struct vq_vhu_msg *msg, void *buf,
				      size_t cap);
int vq_vhu_decode_backend_request(const void *buf, size_t len, const int *fds,
				  unsigned nfds, struct vq_vhu_msg *msg,
				  char *err, size_t errlen);

/* Close the fds msg owns and forget them. */
void vq_vhu_msg_close_fds(struct vq_vhu_msg *msg);

#ifdef __cplusplus
}
#endif
#endif
