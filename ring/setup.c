/* ring/setup.c -- creating a ring (setup-flag fallback, MSG_RING probe), its info
 * and stats, and teardown. */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* io_uring_setup with these flags and sizes, into ring. */
static int rf__setup_try(struct io_uring *ring, unsigned flags, unsigned sq, unsigned cq,
			 const struct rf_ring_opts *o)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof(p));
	p.flags = flags | IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
	p.cq_entries = cq;
	if (flags & IORING_SETUP_SQPOLL)
		p.sq_thread_idle = o->sqpoll_idle_ms ? o->sqpoll_idle_ms : 1000;
	return io_uring_queue_init_params(sq, ring, &p);
}

/* entries: a power of 2 in [2, RF__MAX_SQ_ENTRIES]. */
static int rf__setup(struct rf_ring *r, unsigned entries, const struct rf_ring_opts *o)
{
	unsigned want = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
			IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL;
	/* Dropped in this order while the kernel refuses them: newest kernels' first. */
	static const unsigned drop[] = { IORING_SETUP_DEFER_TASKRUN, IORING_SETUP_SINGLE_ISSUER,
					 IORING_SETUP_COOP_TASKRUN, IORING_SETUP_SUBMIT_ALL };
	if (o && (o->flags & RF_RING_SQPOLL))
		want = (want & ~(IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN)) |
		       IORING_SETUP_SQPOLL;
	if (o && (o->flags & RF_RING_IOPOLL))
		want |= IORING_SETUP_IOPOLL;
	/* 4x the SQ, within the kernel's CQ limit (CLAMP too, in case it is lower). */
	unsigned cq = entries > RF__MAX_CQ_ENTRIES / 4 ? RF__MAX_CQ_ENTRIES : entries * 4;
	size_t i = 0;
	for (;;) {
		int ret = rf__setup_try(&r->ring, want, entries, cq, o);
		if (ret == 0) {
			r->setup_flags = r->ring.flags;
			r->sq_head_seen = *r->ring.sq.khead;
			return 0;
		}
		/* The kernel says -EINVAL both for flags it does not know and for sizes it
		 * refuses. Drop a flag only if a one-entry ring with the same flags fails
		 * too: a size problem must not cost the fast flags. */
		if (ret != -EINVAL)
			return ret;
		if (entries > 1) {
			struct io_uring probe;
			if (rf__setup_try(&probe, want, 1, 4, o) == 0) {
				io_uring_queue_exit(&probe);
				return ret;
			}
		}
		while (i < sizeof(drop) / sizeof(drop[0]) && !(want & drop[i]))
			i++;
		if (i == sizeof(drop) / sizeof(drop[0]))
			return ret;
		want &= ~drop[i++];
	}
}

/* Post a message to ourselves with the ringless register call and reap it. */
static int rf__probe_msg_ring(struct rf_ring *r)
{
	int ret = rf__send_msg(r->ring.ring_fd, RF__TAG_PROBE, 0, 0);
	if (ret < 0)
		return 0;
	for (int tries = 0; tries < 100; tries++) {
		struct io_uring_cqe *c;
		ret = io_uring_wait_cqe(&r->ring, &c);
		r->st.enters++;
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			return 0;
		uint64_t ud = c->user_data;
		io_uring_cq_advance(&r->ring, 1);
		if (ud == RF__TAG_PROBE)
			return 1;
	}
	return 0;
}

int rf_ring_create(struct rf_ring **out, const struct rf_ring_opts *opts)
{
	if (!out)
		return rf__fail(-EINVAL, "rf_ring_create: out is NULL");
	*out = NULL;
	if (opts && (opts->flags & ~(unsigned)(RF_RING_SQPOLL | RF_RING_NO_MSG_RING |
					       RF_RING_NO_MULTISHOT | RF_RING_IOPOLL)))
		return rf__fail(-EINVAL, "rf_ring_create: opts->flags 0x%x: bits 0x%x are no "
				"RF_RING_* flag", opts->flags,
				opts->flags & ~(unsigned)(RF_RING_SQPOLL | RF_RING_NO_MSG_RING |
							  RF_RING_NO_MULTISHOT | RF_RING_IOPOLL));
	unsigned entries = opts && opts->entries ? opts->entries : 256;
	if (entries > RF__MAX_SQ_ENTRIES)
		return rf__fail(-EINVAL, "rf_ring_create: opts->entries = %u, expected at most "
				"RF_RING_MAX_ENTRIES (%u)", entries, RF__MAX_SQ_ENTRIES);
	/* aligned as its type says (the parked flag has a cache line of its own) */
	struct rf_ring *r = aligned_alloc(_Alignof(struct rf_ring),
					  (sizeof(*r) + _Alignof(struct rf_ring) - 1) /
					  _Alignof(struct rf_ring) * _Alignof(struct rf_ring));
	if (!r)
		return rf__fail(-ENOMEM, "rf_ring_create: no memory for the ring");
	memset(r, 0, sizeof(*r));
	r->kinds = rf__kinds;
	r->owner_tid = rf__gettid();
	int ret = rf__fault_parse(&r->fault, getenv("RF_FAULT_INJECT"));
	if (ret == 0)
		ret = rf__spin_parse(getenv("RF_RING_SPIN_US"), &r->spin_ns);
	if (ret < 0) {
		free(r);
		return ret;
	}
	unsigned e = 2;  /* at least 2: a request with a deadline takes two SQEs at once */
	while (e < entries)
		e <<= 1;
	ret = rf__setup(r, e, opts);
	if (ret < 0) {
		free(r);
		/* what an operator can do about it: the two limits that say these */
		const char *hint = ret == -ENOMEM ? "; a ring's memory counts against "
			"RLIMIT_MEMLOCK (ulimit -l) for a user without CAP_IPC_LOCK" :
			ret == -EPERM ? "; sysctl kernel.io_uring_disabled (1: root and the "
			"io_uring_group only, 2: nobody) or a seccomp filter forbids it" :
			ret == -EMFILE || ret == -ENFILE ? "; the process's open files "
			"(ulimit -n)" : "";
		return rf__fail(ret, "rf_ring_create: the kernel refused an io_uring of %u entries "
				"(io_uring_setup: %s%s)", e, strerror(-ret), hint);
	}
	/* Saves an fd lookup per enter; harmless where unsupported. ring_fd stays valid
	 * for the MSG_RING target. */
	io_uring_register_ring_fd(&r->ring);
	r->nslot_free = UINT32_MAX;
	r->no_multishot = opts && (opts->flags & RF_RING_NO_MULTISHOT);
	rf__ops_probe(r);
	if (!(opts && (opts->flags & RF_RING_NO_MSG_RING)))
		r->msg_ring = rf__probe_msg_ring(r);
	rf__spinners_add(1); /* its reactor spins while a poller is busy */
	*out = r;
	return 0;
}

void rf_ring_get_info(const struct rf_ring *r, struct rf_ring_info *info)
{
	info->setup_flags = r->setup_flags;
	info->sq_entries = r->ring.sq.ring_entries;
	info->cq_entries = r->ring.cq.ring_entries;
	info->msg_ring = r->msg_ring;
}

void rf_ring_get_stats(const struct rf_ring *r, struct rf_ring_stats *st)
{
	*st = r->st;
}

void rf_ring_destroy(struct rf_ring *r)
{
	if (!r)
		return;
	if (rf__owner_check(r, "rf_ring_destroy") < 0) {   /* the owner may be in it now */
		rf__log(RF_LOG_ERROR, "%s (the ring is left as it was)", rf_last_error());
		return;
	}
	/* The run loop below on the stack still uses the ring when it calls back. */
	if (r->cb_depth || r->in_run) {
		rf__fail(-EDEADLK, "rf_ring_destroy: called from inside a callback or "
			 "rf_ring_run_until predicate of the same ring; expected a call after "
			 "rf_ring_run returns (the ring is left as it was)");
		rf__log(RF_LOG_ERROR, "%s", rf_last_error());
		return;
	}
	r->destroying = 1;
	rf__spinners_add(-1);
	rf__notifiers_teardown(r);
	rf__watches_teardown(r);
	rf__pollers_free(r);
	if (r->nlive) {
		/* Every request still allocated reports -ECANCELED, whatever the kernel says. */
		for (unsigned s = 0; s < r->nslabs; s++)
			for (unsigned i = 0; i < RF__SLAB_SIZE; i++)
				if (r->slabs[s][i].live)
					r->slabs[s][i].flags |= RF__RQ_CANCELLED;
		rf__ops_teardown(r); /* parked receives are not in the kernel */
		(void)rf__queue_ctl(r, RF__CTL_CANCEL_ALL, NULL, 0);
	}
	int spins = 0;
	while (r->nlive || r->nbacklog > r->backlog_head) {
		r->in_run = 1;
		int ret = rf__turn(r, r->nlive > 0, NULL);
		r->in_run = 0;
		if (ret < 0 && ret != -EINTR && ++spins > 100)
			break; /* the ring is closed below, which cancels the rest */
	}
	rf__groups_free(r);
	io_uring_queue_exit(&r->ring);
	for (unsigned s = 0; s < r->nslabs; s++)
		free(r->slabs[s]);
	free(r->slabs);
	free(r->nslots);
	free(r->backlog);
	if (r->arena_map)
		munmap(r->arena_map, r->arena_map_len);
	free(r->mems);
	free(r->files);
	free(r);
}
