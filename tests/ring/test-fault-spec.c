/* ring-fault-spec: a malformed RF_FAULT_INJECT is refused with a message that says
 * so. For each of a list of bad values (garbage, a missing '=' or value, unknown
 * keys, bad and overflowing numbers, fractions outside [0,1], nan/inf/hex, bad op
 * names, empty fields, repeated keys, trailing junk, control characters, a value
 * too long to echo) rf_ring_create must return -EBADMSG (not -EINVAL, which tools
 * report as a ring setup failure), leave *out NULL, and leave exactly one line in
 * rf_last_error() that starts with "RF_FAULT_INJECT=", names the character position
 * and the offending token, says what is wrong and gives the expected syntax. The
 * library itself writes nothing to stderr (captured through a pipe) and logs
 * nothing. The same bad value again is refused with the same message. Valid values,
 * unusual but legal ones included, still create a ring and print nothing. */
#include "ring-test.h"

#include <fcntl.h>

#include "log.h"

struct bad {
	const char *spec;
	unsigned pos;      /* 1-based character the message must name */
	const char *token; /* must appear as ("token") */
	const char *what;
};

static const struct bad bads[] = {
	{ "garbage", 1, "garbage", "no '=' in this field" },
	{ "eio", 1, "eio", "no '=' in this field" },
	{ "=0.5", 1, "", "unknown key" },
	{ "bogus=1", 1, "bogus", "unknown key" },
	{ "EIO=0.5", 1, "EIO", "unknown key" },
	{ "eio=0.1,bogus=1", 9, "bogus", "unknown key" },
	{ "eio=", 1, "eio=", "missing value" },
	{ "eio=abc", 5, "abc", "not a number" },
	{ "eio=0.5x", 5, "0.5x", "not a number" },
	{ "eio=0.5 ", 5, "0.5 ", "not a number" },
	{ "eio= 0.5", 5, " 0.5", "not a number" },
	{ "eio=0.5;short=0.1", 5, "0.5;short=0.1", "not a number" },
	{ "eio=nan", 5, "nan", "not a number" },
	{ "eio=inf", 5, "inf", "not a number" },
	{ "eio=0x1p-1", 5, "0x1p-1", "not a number" },
	{ "eio=-", 5, "-", "not a number" },
	{ "eio=-0.1", 5, "-0.1", "fraction outside [0,1]" },
	{ "eio=1.5", 5, "1.5", "fraction outside [0,1]" },
	{ "eagain=2", 8, "2", "fraction outside [0,1]" },
	{ "eintr=0.5e", 7, "0.5e", "not a number" },
	{ "short=1e400", 7, "1e400", "number out of range" },
	{ "eio=0.1,eio=0.2", 9, "eio=0.2", "key given twice" },
	{ "eio=0.1,", 9, "", "empty field" },
	{ ",eio=0.1", 1, ",", "empty field" },
	{ "eio=0.1,,short=0.2", 9, ",", "empty field" },
	{ "seed=abc", 6, "abc", "not an unsigned integer" },
	{ "seed=0x", 6, "0x", "not an unsigned integer" },
	{ "seed=0x-1", 6, "0x-1", "not an unsigned integer" },
	{ "seed=-1", 6, "-1", "not an unsigned integer" },
	{ "seed=12junk", 6, "12junk", "not an unsigned integer" },
	{ "seed=18446744073709551616", 6, "18446744073709551616", "does not fit in 64 bits" },
	{ "seed=99999999999999999999999", 6, "99999999999999999999999", "does not fit in 64 bits" },
	{ "ops=reed", 5, "reed", "unknown op" },
	{ "ops=read+wrte", 10, "wrte", "unknown op" },
	{ "ops=read+", 10, "", "empty op name" },
	{ "ops=read,write", 10, "write", "no '=' in this field" },
	{ "eio=\x01", 5, "?", "not a number" },
};

static const char *const goods[] = {
	"eio=0",
	"eio=1",
	"eio=.5",
	"eio=1e-3",
	"short=0.25,seed=0x10",
	"seed=18446744073709551615",
	"ops=write",
	"eagain=0.1,eintr=0.1,ops=read+write",
	"eio=0.5,short=0.5,eagain=0.5,eintr=0.5,seed=1,ops=write+read",
};

static int pipefd[2];
static int nlogged;
static char printed[4096]; /* what the last create wrote to stderr: must stay "" */

static void count_log(enum rf_log_level level, const char *msg, void *user)
{
	(void)level;
	(void)msg;
	(void)user;
	nlogged++;
}

/* rf_ring_create with RF_FAULT_INJECT=spec; rf_last_error() into out, its stderr
 * output into printed. */
static int create_capture(const char *spec, struct rf_ring **r, char *out, size_t cap)
{
	T_CHECK(setenv("RF_FAULT_INJECT", spec, 1) == 0);
	fflush(stderr);
	int saved = dup(2);
	T_CHECK(saved >= 0 && dup2(pipefd[1], 2) == 2);
	int ret = rf_ring_create(r, NULL);
	fflush(stderr);
	T_CHECK(dup2(saved, 2) == 2);
	close(saved);
	T_CHECK(unsetenv("RF_FAULT_INJECT") == 0);
	ssize_t n = read(pipefd[0], printed, sizeof(printed) - 1);
	if (n < 0 && errno == EAGAIN)
		n = 0;
	T_CHECK(n >= 0);
	printed[n] = '\0';
	snprintf(out, cap, "%s", ret < 0 ? rf_last_error() : "");
	return ret;
}

int main(void)
{
	T_CHECK(pipe2(pipefd, O_NONBLOCK | O_CLOEXEC) == 0);
	rf_log_set(count_log, NULL);
	char out[4096], want[256];
	struct rf_ring *r;
	int failed = 0;

	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		const struct bad *b = &bads[i];
		r = (struct rf_ring *)out;
		int ret = create_capture(b->spec, &r, out, sizeof(out));
		int ok = ret == -EBADMSG && r == NULL;
		ok = ok && !strncmp(out, "RF_FAULT_INJECT=\"", 17) && !printed[0];
		size_t len = strlen(out);
		ok = ok && len > 0 && !memchr(out, '\n', len);
		snprintf(want, sizeof(want), "at character %u (\"%s\"): %s", b->pos, b->token, b->what);
		ok = ok && strstr(out, want) && strstr(out, "expected syntax: key=value[,key=value...] with keys eio,");
		printf("%-34s -> %s\n", strchr(b->spec, 1) ? "eio=\\x01" : b->spec, out);
		if (!ok) {
			fprintf(stderr, "FAIL: RF_FAULT_INJECT=\"%s\": ret %d, message \"%s\", wanted \"%s\"\n",
				b->spec, ret, out, want);
			failed = 1;
		}
		/* The same value again: refused the same way. */
		char first[sizeof(out)];
		snprintf(first, sizeof(first), "%s", out);
		ret = create_capture(b->spec, &r, out, sizeof(out));
		if (ret != -EBADMSG || strcmp(out, first) || printed[0]) {
			fprintf(stderr, "FAIL: second \"%s\": ret %d, message \"%s\"\n", b->spec, ret, out);
			failed = 1;
		}
	}

	/* Too long to echo in full: still one line, cut. */
	char longspec[400];
	memset(longspec, 'x', sizeof(longspec) - 1);
	longspec[sizeof(longspec) - 1] = '\0';
	T_EQ(create_capture(longspec, &r, out, sizeof(out)), -EBADMSG);
	printf("(400 x) -> %s\n", out);
	T_CHECK(strstr(out, "RF_FAULT_INJECT=\"xxx") && strstr(out, "...") &&
		strstr(out, "no '=' in this field"));
	T_CHECK(strlen(out) < 600 && !memchr(out, '\n', strlen(out)) && !printed[0]);

	for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
		int ret = create_capture(goods[i], &r, out, sizeof(out));
		if (ret != 0 || printed[0]) {
			fprintf(stderr, "FAIL: valid \"%s\": ret %d, message \"%s\"\n", goods[i], ret, out);
			failed = 1;
			continue;
		}
		rf_ring_destroy(r);
	}
	/* Set but empty: no faults. */
	T_EQ(create_capture("", &r, out, sizeof(out)), 0);
	T_CHECK(!printed[0]);
	T_EQ(nlogged, 0);
	rf_ring_destroy(r);
	close(pipefd[0]);
	close(pipefd[1]);
	return failed;
}
