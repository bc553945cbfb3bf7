/* ring/poll.c -- pollers: completions the owner thread reads from memory at every turn
 * (ring.h, "pollers"), and the bounded spin before a turn sleeps while one is busy
 * (dispatch.c: rf__turn). */
#include "ring-impl.h"

#include "rf-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define RF__SPIN_MAX_NS 10000000ull   /* 10 ms */
#define RF__SPIN_DEFAULT_NS 50000ull  /* 50 us */

struct rf_poller {
	struct rf_ring *r;
	rf_poll_cb cb;
	void *data;
	int dead;               /* removed while the ring was polling */
	uint64_t held;          /* completions it will deliver (rf_poller_hold) */
	struct rf_poller *next;
};

int rf__spin_parse(const char *s, uint64_t *ns)
{
	uint64_t us;
	int ret = rf__env_u64("RF_RING_SPIN_US", s, 0, RF__SPIN_MAX_NS / 1000ull,
			      RF__SPIN_DEFAULT_NS / 1000ull, "microseconds of spin", &us);

	*ns = us * 1000ull;  /* the default where refused */
	return ret;
}

int rf_poller_add(struct rf_ring *r, rf_poll_cb cb, void *data, struct rf_poller **out)
{
	struct rf_poller *p;

	if (!r || !cb || !out)
		return rf__fail(-EINVAL, "rf_poller_add: expected a ring, a callback and an out "
				"pointer (got %p, %p, %p)", (void *)r, (void *)(uintptr_t)cb,
				(void *)out);
	*out = NULL;
	RF__OWNER_OR_RETURN(r, "rf_poller_add");
	if (r->destroying)
		return rf__fail(-ESHUTDOWN, "rf_poller_add: the ring is being destroyed");
	if (!(p = calloc(1, sizeof(*p))))
		return rf__fail(-ENOMEM, "rf_poller_add: no memory");
	p->r = r;
	p->cb = cb;
	p->data = data;
	p->next = r->pollers;
	r->pollers = p;
	*out = p;
	return 0;
}

static void rf__poller_unlink(struct rf_ring *r, struct rf_poller *p)
{
	for (struct rf_poller **pp = &r->pollers; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			free(p);
			return;
		}
}

void rf_poller_hold(struct rf_poller *p, int64_t n)
{
	uint64_t m;

	if (!p || rf__owner_check_void(p->r, "rf_poller_hold") < 0)
		return;
	if (n < 0) {    /* never below zero (INT64_MIN's magnitude taken without overflow) */
		m = (uint64_t)0 - (uint64_t)n;
		if (m > p->held)
			m = p->held;
		p->held -= m;
		p->r->poll_held -= m;
		return;
	}
	m = (uint64_t)n;        /* saturating: a count past 2^64 is no count */
	if (m > UINT64_MAX - p->r->poll_held)
		m = UINT64_MAX - p->r->poll_held;
	p->held += m;
	p->r->poll_held += m;
}

int rf_ring_parked(const struct rf_ring *r)
{
	if (!r)
		return 0;
	/* pairs with the owner's fence between setting parked and its last poll: this
	 * thread's earlier stores (what a poller reads) and the owner's flag are ordered */
	atomic_thread_fence(memory_order_seq_cst);
	return atomic_load_explicit(&((struct rf_ring *)r)->parked, memory_order_relaxed);
}

void rf_poller_remove(struct rf_poller *p)
{
	if (!p || rf__owner_check_void(p->r, "rf_poller_remove") < 0)
		return;
	p->r->poll_held -= p->held;         /* what it held no longer comes */
	p->held = 0;
	if (p->r->polling) { /* the list is being walked: unlinked when the walk ends */
		p->dead = 1;
		p->r->poll_dead = 1;
		return;
	}
	rf__poller_unlink(p->r, p);
}

unsigned rf__poll(struct rf_ring *r, int *busy)
{
	unsigned n = 0;

	*busy = 0;
	if (!r->pollers)
		return 0;
	r->polling++;
	for (struct rf_poller *p = r->pollers; p; p = p->next) {
		int b = 0;
		if (p->dead)
			continue;
		r->cb_depth++;
		n += p->cb(p->data, &b);
		r->cb_depth--;
		if (b && !p->dead)
			*busy = 1;
	}
	if (--r->polling == 0 && r->poll_dead) {
		struct rf_poller **pp = &r->pollers;
		r->poll_dead = 0;
		while (*pp) {
			struct rf_poller *p = *pp;
			if (p->dead) {
				*pp = p->next;
				free(p);
			} else {
				pp = &p->next;
			}
		}
	}
	r->st.polled += n;
	return n;
}

void rf__pollers_free(struct rf_ring *r)
{
	while (r->pollers) {
		struct rf_poller *p = r->pollers;
		r->pollers = p->next;
		free(p);
	}
}

int rf_ring_set_spin(struct rf_ring *r, uint64_t spin_ns)
{
	if (!r || spin_ns > RF__SPIN_MAX_NS)
		return rf__fail(-EINVAL, "rf_ring_set_spin: %llu ns, expected a ring and at most "
				"%llu ns", (unsigned long long)spin_ns, RF__SPIN_MAX_NS);
	RF__OWNER_OR_RETURN(r, "rf_ring_set_spin");
	r->spin_ns = spin_ns;
	return 0;
}
