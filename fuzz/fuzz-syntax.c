/* fuzz-syntax: the small grammars of option values and environment variables, each with
 * an oracle on what it accepts (the first byte chooses the parser):
 *   --bs (rf_bs_parse): sizes drawn are multiples of the grain within [grain, max];
 *   --random-distribution (rf_dist_parse): draws stay below the block count;
 *   --size, --offset, --rate (rf_parse_size), integer and float options (rf_cli_u64,
 *   rf_cli_double): accepted values are in their range;
 *   RF_FAULT_INJECT (rf__fault_parse): fractions in [0, 1];
 *   RF_RING_SPIN_US (rf__spin_parse): at most 10 ms, digits only;
 *   RF_CUDNN_WORKSPACE (rf__ws_budget): digits and a unit;
 *   RF_HTTP_TIMEOUT_MS (rf_dataset_http_timeout): 1..3600000 ms. */
#include "fuzz.h"

#include "../tools/cli.h"
#include "../tools/iobench/iobench-bs.h"
#include "../tools/iobench/iobench-dist.h"
#include "dataset.h"
#include "plan-cache.h"
#include "ring-impl.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
	char err[256];
	if (!n || n > 4096)
		return 0;
	char *s = fz_str(d + 1, n - 1);
	uint64_t u;
	double x;
	size_t z;
	struct rf_bs b;
	struct rf_dist dist;
	struct rf__fault f;
	switch (d[0] % 8) {
	case 0:
		if (rf_bs_parse(s, &b, err, sizeof(err)) == 0) {
			FZ_ASSERT(b.grain >= 1 && b.grain <= b.max);
			for (uint64_t r = 0; r < 64; r++) {
				uint64_t v = rf_bs_draw(&b, r * 0x9e3779b97f4a7c15ull);
				FZ_ASSERT(v >= b.grain && v <= b.max && v % b.grain == 0);
			}
		}
		break;
	case 1:
		if (rf_dist_parse(s, &dist, err, sizeof(err)) == 0)
			for (uint64_t nb = 1; nb <= 4096; nb *= 8) {
				rf_dist_init(&dist, nb, d[0]);
				for (int i = 0; i < 32; i++)
					FZ_ASSERT(rf_dist_next(&dist) < nb);
			}
		break;
	case 2:
		(void)rf_parse_size(s);
		if (rf_cli_u64(s, 1, 1000, &u) == 0)
			FZ_ASSERT(u >= 1 && u <= 1000);
		if (rf_cli_double(s, 0.5, 1e6, &x) == 0)
			FZ_ASSERT(x >= 0.5 && x <= 1e6);
		break;
	case 3:
		if (rf__fault_parse(&f, s) == 0)
			FZ_ASSERT(f.eio >= 0 && f.eio <= 1 && f.eagain >= 0 && f.eagain <= 1 &&
				  f.eintr >= 0 && f.eintr <= 1 && f.shrt >= 0 && f.shrt <= 1);
		break;
	case 4:
		if (rf__spin_parse(s, &u) == 0) {
			FZ_ASSERT(u <= 10000000ull);
			for (const char *p = s; *p; p++)
				FZ_ASSERT(*p >= '0' && *p <= '9');
		}
		break;
	case 5:
		(void)rf__ws_budget(s, (size_t)d[0] << 24, &z, err, sizeof(err));
		break;
	case 6:
		setenv("RF_HTTP_TIMEOUT_MS", s, 1);
		if (rf_dataset_http_timeout(&u) == 0)
			FZ_ASSERT(u >= 1000000ull && u <= 3600000ull * 1000000ull);
		unsetenv("RF_HTTP_TIMEOUT_MS");
		break;
	default:
		(void)rf_bs_parse(s, &b, err, sizeof(err));
		(void)rf_dist_parse(s, &dist, err, sizeof(err));
		break;
	}
	free(s);
	return 0;
}
