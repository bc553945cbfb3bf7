/* devices/cpu/par.h -- one op's work spread over cores the CPU streams leave idle.
 *
 * A CPU device's compute streams run one op each on a thread of their own, and a
 * model's ops are often a chain: ResNet-18's forward keeps one stream busy while the
 * other core waits. Helper threads (one fewer than the CPUs, started with the first CPU
 * device and joined with the last) take chunks of a kernel's work when a core is idle:
 * rf__par_for(n, fn, arg) runs fn(arg, i) for each i in [0, n) on the calling thread,
 * joined by the helpers that are free. The work is offered only while fewer ops run on
 * CPU streams than there are CPUs (rf__par_busy), and one kernel at a time (another
 * caller meanwhile runs its chunks alone), so helpers never crowd out a stream.
 *
 * Chunks must write disjoint memory and each must compute the same bits whichever
 * thread runs it: the result then never depends on how many helpers joined, or whether
 * any did. RF_CPU_HELPERS=N caps the helpers (0: none; read when the pool starts). Not
 * installed. */
#ifndef RF_DEVICES_CPU_PAR_H
#define RF_DEVICES_CPU_PAR_H

/* The pool's users: the first acquire starts the helpers, the last release joins them
 * (a process forked since then only forgets them). 0 or -errno (with rf_last_error). */
int rf__par_acquire(void);
void rf__par_release(void);

/* An op starts (+1) or ends (-1) on a CPU device's stream. */
void rf__par_busy(int delta);

/* Whether rf__par_for would offer work now (helpers running, a CPU idle, no other
 * kernel's work on offer): a kernel that must prepare shared state first asks. */
int rf__par_open(void);

/* fn(arg, i) for every i in [0, n), each once, on this thread and any helpers that join
 * (n up to 65535; more run on this thread alone); returns when all have returned, their
 * writes visible to the caller. */
void rf__par_for(unsigned n, void (*fn)(void *arg, unsigned i), void *arg);

/* How many helpers the pool has (0 when it is not started); for tests and stats. */
unsigned rf__par_helpers(void);

/* Since the process started: the rf__par_for calls whose work was offered, and the
 * chunks helpers ran. */
struct rf__par_stats {
	unsigned long long offered, helped;
};
struct rf__par_stats rf__par_stats(void);

#endif
