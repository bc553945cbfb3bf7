/* ring/fault.c -- RF_FAULT_INJECT: parsing the spec at ring creation and turning
 * completions of faultable reads and writes into -EIO, -EAGAIN, -EINTR or short
 * counts (syntax: rf_ring_create in ring.h). */
#include "ring-impl.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rf-internal.h"

static uint64_t rf__splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rf__unit(uint64_t *s)
{
	return (double)(rf__splitmix64(s) >> 11) * 0x1.0p-53;
}

#define RF__FAULT_SYNTAX                                                              \
	"expected syntax: key=value[,key=value...] with keys eio, eagain, eintr, short " \
	"(a fraction in [0,1]), seed (an unsigned integer), ops (read, write, send, "     \
	"recv joined by +), each at most once, e.g. \"eio=0.01,short=0.1,seed=7\""

/* Copy n bytes of s into dst for a message: printable ASCII only, long runs cut. */
static void rf__printable(char *dst, size_t cap, const char *s, size_t n)
{
	size_t max = cap - 1 < 96 ? cap - 1 : 96, j = 0;
	for (size_t i = 0; i < n && j < max; i++)
		dst[j++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (n > max && max >= 3)
		memcpy(dst + max - 3, "...", 3);
	dst[j] = '\0';
}

/* Record one line naming RF_FAULT_INJECT, the character where the trouble starts
 * (1-based) and the token there as rf_last_error(). Returns -EBADMSG. */
static int rf__fault_err(const char *spec, const char *at, size_t tlen, const char *what)
{
	char sp[100], tok[100];
	rf__printable(sp, sizeof(sp), spec, strlen(spec));
	rf__printable(tok, sizeof(tok), at, tlen);
	return rf__fail(-EBADMSG, "RF_FAULT_INJECT=\"%s\": at character %zu (\"%s\"): %s; " RF__FAULT_SYNTAX,
			sp, (size_t)(at - spec) + 1, tok, what);
}

/* A fraction in [0,1]: decimal digits, optional fraction and exponent; no spaces,
 * hex, inf or nan. Returns NULL or what is wrong. */
static const char *rf__parse_fraction(const char *v, size_t n, double *out)
{
	char buf[64];
	if (n >= sizeof(buf))
		return "value too long";
	if (!((v[0] >= '0' && v[0] <= '9') || v[0] == '.' || v[0] == '-'))
		return "not a number";
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789.eE+-", v[i]) || !v[i])
			return "not a number";
	memcpy(buf, v, n);
	buf[n] = '\0';
	char *end;
	errno = 0;
	double d = strtod(buf, &end);
	if (end != buf + n)
		return "not a number";
	if (errno == ERANGE)
		return "number out of range";
	if (!(d >= 0 && d <= 1))
		return "fraction outside [0,1]";
	*out = d;
	return NULL;
}

/* An unsigned 64-bit integer, decimal or 0x hex. */
static const char *rf__parse_u64(const char *v, size_t n, uint64_t *out)
{
	char buf[64];
	if (n >= sizeof(buf))
		return "value too long";
	if (!(v[0] >= '0' && v[0] <= '9'))
		return "not an unsigned integer";
	memcpy(buf, v, n);
	buf[n] = '\0';
	char *end;
	errno = 0;
	/* base 0 would read 010 as octal (8): decimal, or hex after 0x */
	int hex = buf[0] == '0' && (buf[1] == 'x' || buf[1] == 'X');
	unsigned long long x = strtoull(hex ? buf + 2 : buf, &end, hex ? 16 : 10);
	if (hex && !isxdigit((unsigned char)buf[2]))
		return "not an unsigned integer";  /* 0x, 0x-1 (strtoull wraps it), 0x 5 */
	if (end != buf + n)
		return "not an unsigned integer";
	if (errno == ERANGE)
		return "does not fit in 64 bits";
	*out = x;
	return NULL;
}

/* The ops= value [v, fe): read, write, send and recv joined by "+" (read+write, say).
 * 0 or -EBADMSG. */
static int rf__parse_ops(struct rf__fault *f, const char *spec, const char *v, const char *fe)
{
	f->ops = 0;
	const char *o = v;
	for (;;) {
		size_t olen = strcspn(o, "+,");
		if (o + olen > fe)
			olen = (size_t)(fe - o);
		if (olen == 4 && !memcmp(o, "read", 4))
			f->ops |= RF__FAULT_READ;
		else if (olen == 5 && !memcmp(o, "write", 5))
			f->ops |= RF__FAULT_WRITE;
		else if (olen == 4 && !memcmp(o, "send", 4))
			f->ops |= RF__FAULT_SEND;
		else if (olen == 4 && !memcmp(o, "recv", 4))
			f->ops |= RF__FAULT_RECV;
		else
			return rf__fault_err(spec, o, olen,
					     olen ? "unknown op (read, write, send or recv)" : "empty op name");
		if (o + olen == fe)
			return 0;
		o += olen + 1;
	}
}

int rf__fault_parse(struct rf__fault *f, const char *spec)
{
	static const char *const keys[] = { "eio", "eagain", "eintr", "short", "seed", "ops" };
	enum { K_EIO, K_EAGAIN, K_EINTR, K_SHORT, K_SEED, K_OPS, K_N };
	memset(f, 0, sizeof(*f));
	f->state = 1;
	f->ops = RF__FAULT_READ;
	if (!spec || !*spec)
		return 0;
	unsigned seen = 0;
	const char *p = spec;
	for (;;) {
		const char *fe = p + strcspn(p, ",");
		size_t flen = (size_t)(fe - p);
		if (!flen)
			return rf__fault_err(spec, p, *p ? 1 : 0,
					     "empty field (a comma at the start or end, or two in a row)");
		const char *eq = memchr(p, '=', flen);
		if (!eq)
			return rf__fault_err(spec, p, flen, "no '=' in this field");
		size_t klen = (size_t)(eq - p);
		int k = 0;
		while (k < K_N && !(strlen(keys[k]) == klen && !memcmp(p, keys[k], klen)))
			k++;
		if (k == K_N)
			return rf__fault_err(spec, p, klen, "unknown key");
		if (seen & (1u << k))
			return rf__fault_err(spec, p, flen, "key given twice");
		seen |= 1u << k;
		const char *v = eq + 1;
		size_t vlen = (size_t)(fe - v);
		if (!vlen)
			return rf__fault_err(spec, p, flen, "missing value");
		const char *bad = NULL;
		switch (k) {
		case K_EIO: bad = rf__parse_fraction(v, vlen, &f->eio); break;
		case K_EAGAIN: bad = rf__parse_fraction(v, vlen, &f->eagain); break;
		case K_EINTR: bad = rf__parse_fraction(v, vlen, &f->eintr); break;
		case K_SHORT: bad = rf__parse_fraction(v, vlen, &f->shrt); break;
		case K_SEED: bad = rf__parse_u64(v, vlen, &f->state); break;
		case K_OPS: {
			int ret = rf__parse_ops(f, spec, v, fe);
			if (ret < 0)
				return ret;
			break;
		}
		}
		if (bad)
			return rf__fault_err(spec, v, vlen, bad);
		if (!*fe)
			break;
		p = fe + 1;
	}
	f->active = f->eio > 0 || f->eagain > 0 || f->eintr > 0 || f->shrt > 0;
	return 0;
}

/* Applied when a faultable read or write completes with res > 0. Each fault draws
 * from the generator only when its fraction is set, so a spec without the newer
 * keys replays the same faults as before. */
/* The error faults, drawn in this order: -EIO, -EAGAIN, -EINTR, or 0 for none. */
static int32_t rf__fault_error(struct rf_ring *r)
{
	static const int errs[3] = { -EIO, -EAGAIN, -EINTR };
	struct rf__fault *f = &r->fault;
	const double frac[3] = { f->eio, f->eagain, f->eintr };
	for (int i = 0; i < 3; i++)
		if (frac[i] > 0 && rf__unit(&f->state) < frac[i]) {
			r->st.faults_injected++;
			return errs[i];
		}
	return 0;
}

int32_t rf__fault_apply(struct rf_ring *r, struct rf__req *q, int32_t res)
{
	struct rf__fault *f = &r->fault;
	int32_t e = rf__fault_error(r);
	if (e)
		return e;
	if (f->shrt > 0 && rf__unit(&f->state) < f->shrt) {
		uint32_t gran = (q->flags & RF__RQ_DIRECT) ? 4096 : 1;
		uint32_t units = (uint32_t)res / gran;
		if (units >= 2) {
			r->st.faults_injected++;
			return (int32_t)(gran * (1 + rf__splitmix64(&f->state) % (units - 1)));
		}
	}
	return res;
}

/* Sockets cannot be re-read: a fault there is decided before the piece is queued.
 * An error replaces the piece (nothing is sent or received), a short count shrinks
 * it (the kernel then transfers at most that much, as a real short transfer). */
int32_t rf__fault_sock(struct rf_ring *r, unsigned *n)
{
	struct rf__fault *f = &r->fault;
	int32_t e = rf__fault_error(r);
	if (e)
		return e;
	if (f->shrt > 0 && rf__unit(&f->state) < f->shrt && *n >= 2) {
		r->st.faults_injected++;
		*n = 1 + (unsigned)(rf__splitmix64(&f->state) % (*n - 1));
	}
	return 0;
}

/* Faults are injected only where they cannot change what the caller gets: regular
 * files at an explicit offset (the ring re-reads or rewrites the same bytes). */
void rf__mark_faultable(struct rf_ring *r, struct rf__req *q)
{
	int fd = q->fd;
	if (q->off == UINT64_MAX)
		return;
	if (q->flags & RF_IO_FIXED_FILE) {
		if ((unsigned)fd >= r->nfiles)
			return;
		fd = r->files[fd];
	}
	struct stat sb;
	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		return;
	q->flags |= RF__RQ_FAULTABLE;
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_DIRECT))
		q->flags |= RF__RQ_DIRECT;
}
